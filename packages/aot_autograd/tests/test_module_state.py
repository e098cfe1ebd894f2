import torch

from ember_aot_autograd.module_state import module_state, swapped_state


def test_tied_weights_appear_once_with_every_name():
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    b.weight = a.weight
    model = torch.nn.Sequential(a, b)
    state = module_state(model)
    assert state[0][0] == ("0.weight", "1.weight")
    assert len(state) == 3


def test_swapped_state_restores():
    model = torch.nn.BatchNorm1d(2)
    original = model.running_mean
    names = [names for names, _ in module_state(model)]
    replacement = [torch.zeros_like(t) for _, t in module_state(model)]
    with swapped_state(model, names, replacement):
        assert model.running_mean is replacement[2]
    assert model.running_mean is original
