"""Public-suite runner: timm, Hugging Face and torchvision models, eager vs torch.compile vs
Ember interleaved in one process. See run.py."""
