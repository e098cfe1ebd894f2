// TENSOR_MATCH in C++: the CHECK_NATIVE plug-in of ember_frame_hook's GuardProgram.
//
// The Python guard reads a tensor's metadata through five attribute getters (shape,
// dtype, is_cpu, requires_grad, is_contiguous()), each a Python-level call that builds
// its result; here the same facts are read from the at::Tensor in one C++ call. Built
// by guards/native_tensor.py with torch.utils.cpp_extension; the tracer uses it only for
// exact torch.Tensor / nn.Parameter values (the program checks the class first).
//
// `data` is the tuple native_tensor.spec_data() packs:
//   (dtype, device, layout_or_None, requires_grad, sizes, strides_or_None,
//    contiguous_decides, is_complex, dynamic_min)
// with -1 for an unchecked size/stride. Wherever the fast read could answer
// differently from the Python getters (a torch function mode is active, the tensor is
// not plainly strided, its sizes are symbolic) the check runs the getters themselves.
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Layout.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/extension.h>

// The CHECK_NATIVE plug-in ABI (capsule name, check signature), from
// ember_frame_hook.get_include().
#include <ember_frame_hook.h>

namespace {

struct Spec {
  at::ScalarType dtype;
  PyObject *dtype_obj;
  c10::Device device;
  PyObject *device_obj;
  PyObject *layout_obj;  // nullptr: not checked
  bool requires_grad;
  PyObject *sizes;       // tuple of int (-1: dynamic)
  PyObject *strides;     // tuple of int (-1: unchecked) or nullptr
  bool contiguous_decides;
  bool is_complex;
  int64_t dynamic_min;
};

int64_t item(PyObject *tuple, Py_ssize_t i) { return PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i)); }

bool unpack(PyObject *data, Spec *spec) {
  spec->dtype_obj = PyTuple_GET_ITEM(data, 0);
  spec->dtype = reinterpret_cast<THPDtype *>(spec->dtype_obj)->scalar_type;
  spec->device_obj = PyTuple_GET_ITEM(data, 1);
  spec->device = reinterpret_cast<THPDevice *>(spec->device_obj)->device;
  PyObject *layout = PyTuple_GET_ITEM(data, 2);
  spec->layout_obj = layout == Py_None ? nullptr : layout;
  spec->requires_grad = PyTuple_GET_ITEM(data, 3) == Py_True;
  spec->sizes = PyTuple_GET_ITEM(data, 4);
  PyObject *strides = PyTuple_GET_ITEM(data, 5);
  spec->strides = strides == Py_None ? nullptr : strides;
  spec->contiguous_decides = PyTuple_GET_ITEM(data, 6) == Py_True;
  spec->is_complex = PyTuple_GET_ITEM(data, 7) == Py_True;
  spec->dynamic_min = item(data, 8);
  return true;
}

// `dims` (sizes or strides) against the spec's tuple: -1 entries are unchecked or,
// with `minimum` >= 0, checked >= minimum.
template <typename Dims>
bool dims_match(const Dims &dims, PyObject *expected, int64_t minimum) {
  Py_ssize_t n = PyTuple_GET_SIZE(expected);
  if (static_cast<Py_ssize_t>(dims.size()) != n) return false;
  for (Py_ssize_t i = 0; i < n; i++) {
    int64_t want = item(expected, i);
    if (want == -1) {
      if (minimum >= 0 && dims[i] < minimum) return false;
    } else if (dims[i] != want) {
      return false;
    }
  }
  return true;
}

// The fast path: read the at::Tensor. Only for plainly strided, non-nested tensors with
// concrete sizes and no torch function mode; anything else returns -2 (use the getters).
int fast_check(PyObject *value, const Spec &spec) {
  if (at::impl::torch_function_mode_enabled() || !THPVariable_Check(value)) return -2;
  const at::Tensor &t = THPVariable_Unpack(value);
  if (!t.defined() || t.is_nested() || t.layout() != at::kStrided ||
      t.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
    return -2;
  }
  if (!dims_match(t.sizes(), spec.sizes, spec.dynamic_min)) return 0;
  if (t.scalar_type() != spec.dtype) return 0;
  // as the Python guard: `is_cpu` / `is_meta` for those types, else device equality
  c10::DeviceType type = spec.device.type();
  if (type == c10::DeviceType::CPU || type == c10::DeviceType::Meta) {
    if (t.device().type() != type) return 0;
  } else if (t.device() != spec.device) {
    return 0;
  }
  // layout: strided here, and layout_obj is checked only for strided specs without strides
  if (spec.layout_obj != nullptr &&
      reinterpret_cast<THPLayout *>(spec.layout_obj)->layout != at::kStrided) {
    return 0;
  }
  if (t.requires_grad() != spec.requires_grad) return 0;
  if (spec.is_complex && (t.is_conj() || t.is_neg())) return 0;
  if (spec.contiguous_decides) return t.is_contiguous() ? 1 : 0;
  if (spec.strides != nullptr && !dims_match(t.strides(), spec.strides, -1)) return 0;
  return 1;
}

// The slow path: the attribute reads of the Python guard, in its order.
int getter_check(PyObject *value, const Spec &spec) {
  auto attr = [&](const char *name) { return PyObject_GetAttrString(value, name); };
  auto method = [&](const char *name) { return PyObject_CallMethod(value, name, nullptr); };
  auto truth = [](PyObject *obj, bool expected) {
    if (obj == nullptr) return -1;
    int r = PyObject_IsTrue(obj);
    Py_DECREF(obj);
    return r < 0 ? -1 : (r == static_cast<int>(expected));
  };
  auto dims = [&](PyObject *obj, PyObject *expected, int64_t minimum) -> int {
    if (obj == nullptr) return -1;
    Py_ssize_t n = PyObject_Length(obj);
    int ok = n < 0 ? -1 : n == PyTuple_GET_SIZE(expected);
    for (Py_ssize_t i = 0; ok == 1 && i < n; i++) {
      int64_t want = item(expected, i);
      if (want == -1 && minimum < 0) continue;
      PyObject *index = PyLong_FromSsize_t(i);
      PyObject *got = index ? PyObject_GetItem(obj, index) : nullptr;
      Py_XDECREF(index);
      PyObject *bound = got ? PyLong_FromLongLong(want == -1 ? minimum : want) : nullptr;
      ok = bound ? PyObject_RichCompareBool(got, bound, want == -1 ? Py_GE : Py_EQ) : -1;
      Py_XDECREF(bound);
      Py_XDECREF(got);
    }
    Py_DECREF(obj);
    return ok;
  };
  auto same = [](PyObject *obj, PyObject *expected) {
    if (obj == nullptr) return -1;
    int r = obj == expected;
    Py_DECREF(obj);
    return r;
  };
  int ok = dims(attr("shape"), spec.sizes, spec.dynamic_min);
  if (ok == 1) ok = same(attr("dtype"), spec.dtype_obj);
  if (ok == 1) {
    if (spec.device.type() == c10::DeviceType::CPU) {
      ok = truth(attr("is_cpu"), true);
    } else if (spec.device.type() == c10::DeviceType::Meta) {
      ok = truth(attr("is_meta"), true);
    } else {
      PyObject *device = attr("device");
      ok = device ? PyObject_RichCompareBool(device, spec.device_obj, Py_EQ) : -1;
      Py_XDECREF(device);
    }
  }
  if (ok == 1 && spec.layout_obj != nullptr) ok = same(attr("layout"), spec.layout_obj);
  if (ok == 1) ok = truth(attr("requires_grad"), spec.requires_grad);
  if (ok == 1 && spec.is_complex) ok = truth(method("is_conj"), false);
  if (ok == 1 && spec.is_complex) ok = truth(method("is_neg"), false);
  if (ok == 1 && spec.contiguous_decides) {
    ok = truth(method("is_contiguous"), true);
  } else if (ok == 1 && spec.strides != nullptr) {
    ok = dims(method("stride"), spec.strides, -1);
  }
  return ok;
}

int tensor_check(PyObject *value, PyObject *data) {
  Spec spec{at::kFloat, nullptr, c10::Device(c10::DeviceType::CPU), nullptr, nullptr,
            false, nullptr, nullptr, false, false, -1};
  unpack(data, &spec);
  try {
    int fast = fast_check(value, spec);
    if (fast != -2) return fast;
  } catch (const std::exception &) {
    // the getters decide (and raise, failing the guard, if they must)
  }
  return getter_check(value, spec);
}

}  // namespace

// The capsule GuardProgram's CHECK_NATIVE takes.
pybind11::object capsule() {
  PyObject *c = ember_native_check_capsule(&tensor_check);
  if (c == nullptr) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::object>(c);
}
