"""The C target's call trampoline: a small CPython extension that checks NumPy arrays against a
kernel's signature, allocates its outputs (128-byte aligned) and calls the kernel's function pointer, all in C.

Why: from Python, reading an array's address costs about 1 µs (`a.ctypes.data` and
`a.__array_interface__` build objects), so a ctypes call of a three-argument kernel cost
about 4 µs before it did any work. The trampoline reads the address with the NumPy C API
(`PyArray_DATA`), checks dtype, shape, contiguity, alignment and (for `out=` arrays)
writability and overlap, and calls the kernel with the GIL released.

`call(spec, inputs, out)` returns the dict of outputs, or None whenever anything is unusual
(an array that is not exactly `numpy.ndarray`, a wrong dtype or shape, a missing or extra name,
overlapping outputs, ...): the caller then takes the Python path, which converts what may be
converted (DLPack, allowed copies) and raises the precise RuntimeInputError. The fast path
therefore never decides an error itself.

The extension is one module for every kernel (the signature is data: `make_spec`), built once
with the system compiler against this Python's and NumPy's headers and cached like kernels
(`einc.runtime.cache`). Where it cannot be built (no Python headers, no compiler), `load()`
returns None and kernels are called through ctypes (slower, same results).
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np

from einc.errors import ToolchainError
from einc.runtime.arrays import ALIGNMENT
from einc.runtime.cache import cached_artifact, content_key
from einc.runtime.finders import compiler, compiler_identity

MAX_ARGS = 64
"""Kernels with more arguments than this are called through ctypes."""

FastCall = Callable[[object, Mapping[str, object], Mapping[str, object] | None], "dict[str, np.ndarray] | None"]


def _switch() -> str:
    cases = []
    for n in range(MAX_ARGS + 1):
        params = ", ".join(["void *"] * n) or "void"
        args = ", ".join(f"p[{k}]" for k in range(n))
        cases.append(f"    case {n}: ((void (*)({params}))fn)({args}); break;")
    return "\n".join(cases)


SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <string.h>

#define MAX_ARGS %(max_args)d
#define MAX_RANK 32

typedef struct {
    PyObject *name;            /* str */
    int type_num;
    int ndim;
    npy_intp dims[MAX_RANK];
    int is_output;
    int repeat;                /* an output bound before: a scratch array */
} Arg;

typedef struct {
    void *fn;
    int nargs, ninputs, noutputs; /* noutputs: distinct names */
    Arg args[MAX_ARGS];
} Spec;

static void spec_free(PyObject *capsule) {
    Spec *s = (Spec *)PyCapsule_GetPointer(capsule, "einc.fastcall.spec");
    if (!s) { PyErr_Clear(); return; }
    for (int i = 0; i < s->nargs; i++) Py_XDECREF(s->args[i].name);
    PyMem_Free(s);
}

/* make_spec(fnptr, [(name, type_num, shape, is_output), ...]) -> capsule */
static PyObject *make_spec(PyObject *self, PyObject *a) {
    unsigned long long fn; PyObject *list;
    if (!PyArg_ParseTuple(a, "KO!", &fn, &PyList_Type, &list)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n > MAX_ARGS) { PyErr_SetString(PyExc_ValueError, "too many arguments"); return NULL; }
    Spec *s = (Spec *)PyMem_Calloc(1, sizeof(Spec));
    if (!s) return PyErr_NoMemory();
    s->fn = (void *)(uintptr_t)fn;
    PyObject *capsule = PyCapsule_New(s, "einc.fastcall.spec", spec_free);
    if (!capsule) { PyMem_Free(s); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name, *shape; int type_num, is_output;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(list, i), "UiO!p", &name, &type_num, &PyTuple_Type, &shape, &is_output)) {
            Py_DECREF(capsule); return NULL;
        }
        Arg *arg = &s->args[i];
        Py_INCREF(name); PyUnicode_InternInPlace(&name); arg->name = name;
        s->nargs = (int)i + 1;
        arg->type_num = type_num; arg->is_output = is_output;
        arg->ndim = (int)PyTuple_GET_SIZE(shape);
        if (arg->ndim > MAX_RANK) { PyErr_SetString(PyExc_ValueError, "rank too high"); Py_DECREF(capsule); return NULL; }
        for (int d = 0; d < arg->ndim; d++) arg->dims[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
        if (PyErr_Occurred()) { Py_DECREF(capsule); return NULL; }
        if (is_output) {
            for (Py_ssize_t j = 0; j < i; j++)
                if (s->args[j].is_output && PyUnicode_Compare(s->args[j].name, name) == 0) arg->repeat = 1;
            if (!arg->repeat) s->noutputs++;
        } else {
            s->ninputs++;
        }
    }
    return capsule;
}

static int matches(const Arg *arg, PyObject *obj, int writable) {
    if (!PyArray_CheckExact(obj)) return 0;
    PyArrayObject *a = (PyArrayObject *)obj;
    if (PyArray_TYPE(a) != arg->type_num || !PyArray_ISNOTSWAPPED(a)) return 0;
    if (PyArray_NDIM(a) != arg->ndim) return 0;
    npy_intp *dims = PyArray_DIMS(a);
    for (int d = 0; d < arg->ndim; d++) if (dims[d] != arg->dims[d]) return 0;
    if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a)) return 0;
    if (writable && !PyArray_ISWRITEABLE(a)) return 0;
    return 1;
}

static void call_kernel(void *fn, int n, void **p) {
    switch (n) {
%(switch)s
    }
}

/* A new C-contiguous array of `arg`'s dtype and shape whose data starts on a %(alignment)d-byte
   boundary (einc.runtime.arrays.aligned_empty): a view into an over-allocated byte array. */
static PyObject *aligned_empty(const Arg *arg) {
    PyArray_Descr *descr = PyArray_DescrFromType(arg->type_num);
    if (!descr) return NULL;
#if NPY_ABI_VERSION < 0x02000000
    npy_intp nbytes = descr->elsize;
#else
    npy_intp nbytes = PyDataType_ELSIZE(descr);
#endif
    for (int d = 0; d < arg->ndim; d++) nbytes *= arg->dims[d];
    npy_intp rawlen = nbytes + %(alignment)d - 1;
    PyObject *raw = PyArray_EMPTY(1, &rawlen, NPY_UINT8, 0);
    if (!raw) { Py_DECREF(descr); return NULL; }
    char *data = (char *)PyArray_DATA((PyArrayObject *)raw);
    data += (%(alignment)d - (npy_intp)((uintptr_t)data %% %(alignment)d)) %% %(alignment)d;
    PyObject *view = PyArray_NewFromDescr(&PyArray_Type, descr, arg->ndim, (npy_intp *)arg->dims, NULL, data,
                                          NPY_ARRAY_CARRAY, NULL); /* steals descr */
    if (!view) { Py_DECREF(raw); return NULL; }
    if (PyArray_SetBaseObject((PyArrayObject *)view, raw) < 0) { Py_DECREF(view); return NULL; } /* steals raw */
    return view;
}

/* call(spec, inputs: dict, out: dict | None) -> dict of outputs, or None (take the slow path) */
static PyObject *call(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 3) { PyErr_SetString(PyExc_TypeError, "call(spec, inputs, out)"); return NULL; }
    Spec *s = (Spec *)PyCapsule_GetPointer(argv[0], "einc.fastcall.spec");
    if (!s) return NULL;
    PyObject *inputs = argv[1], *out = argv[2];
    if (!PyDict_CheckExact(inputs) || PyDict_GET_SIZE(inputs) != s->ninputs) Py_RETURN_NONE;
    int given = out != Py_None;
    if (given && (!PyDict_CheckExact(out) || PyDict_GET_SIZE(out) != s->noutputs)) Py_RETURN_NONE;
    void *ptrs[MAX_ARGS];
    char *lo[MAX_ARGS], *hi[MAX_ARGS];
    PyObject *made[MAX_ARGS]; /* new references: allocated outputs and scratch arrays */
    int nmade = 0;
    for (int i = 0; i < s->nargs; i++) {
        const Arg *arg = &s->args[i];
        PyObject *obj = NULL;
        if (!arg->is_output || (given && !arg->repeat)) {
            obj = PyDict_GetItemWithError(arg->is_output ? out : inputs, arg->name);
            if (!obj) {
                if (PyErr_Occurred()) goto error;
                goto slow;
            }
            if (!matches(arg, obj, arg->is_output)) goto slow;
        }
        if (obj == NULL) continue;
        PyArrayObject *a = (PyArrayObject *)obj;
        ptrs[i] = PyArray_DATA(a);
        lo[i] = (char *)PyArray_DATA(a);
        hi[i] = lo[i] + PyArray_NBYTES(a);
    }
    if (given) { /* outputs may not overlap any other argument */
        for (int i = 0; i < s->nargs; i++) {
            if (!s->args[i].is_output || s->args[i].repeat || lo[i] == hi[i]) continue;
            for (int j = 0; j < s->nargs; j++) {
                if (j == i || (s->args[j].is_output && s->args[j].repeat) || lo[j] == hi[j]) continue;
                if (lo[i] < hi[j] && lo[j] < hi[i]) goto slow;
            }
        }
    }
    PyObject *result = PyDict_New();
    if (!result) goto error;
    for (int i = 0; i < s->nargs; i++) {
        const Arg *arg = &s->args[i];
        if (!arg->is_output) continue;
        PyObject *obj;
        if (given && !arg->repeat) {
            obj = PyDict_GetItemWithError(out, arg->name); /* checked above */
        } else {
            obj = aligned_empty(arg);
            if (!obj) { Py_DECREF(result); goto error; }
            made[nmade++] = obj;
            ptrs[i] = PyArray_DATA((PyArrayObject *)obj);
        }
        if (!arg->repeat && PyDict_SetItem(result, arg->name, obj) < 0) { Py_DECREF(result); goto error; }
    }
    Py_BEGIN_ALLOW_THREADS
    call_kernel(s->fn, s->nargs, ptrs);
    Py_END_ALLOW_THREADS
    for (int k = 0; k < nmade; k++) Py_DECREF(made[k]);
    return result;
slow:
    for (int k = 0; k < nmade; k++) Py_DECREF(made[k]);
    Py_RETURN_NONE;
error:
    for (int k = 0; k < nmade; k++) Py_DECREF(made[k]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"make_spec", (PyCFunction)make_spec, METH_VARARGS, "make_spec(fnptr, args) -> spec"},
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL, "call(spec, inputs, out) -> dict | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_einc_fastcall", NULL, -1, methods};

PyMODINIT_FUNC PyInit__einc_fastcall(void) {
    import_array();
    return PyModule_Create(&module);
}
""" % {"max_args": MAX_ARGS, "switch": _switch(), "alignment": ALIGNMENT}


def _includes() -> tuple[str, str]:
    return sysconfig.get_paths()["include"], np.get_include()


@functools.cache
def load() -> ModuleType | None:
    """The trampoline module (built, or reused from the cache), or None where it cannot be
    built here: kernels are then called through ctypes."""
    python_inc, numpy_inc = _includes()
    if not (Path(python_inc) / "Python.h").is_file():
        return None
    cc = compiler()
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    try:
        key = content_key(SOURCE, cc, compiler_identity(cc), sys.version, suffix, np.__version__, python_inc, numpy_inc)
    except ToolchainError:
        return None

    def build(path: Path) -> None:
        source = path.with_name(path.name + ".c")
        source.write_text(SOURCE)
        command = [cc, "-O2", "-shared", "-fPIC", f"-I{python_inc}", f"-I{numpy_inc}", str(source), "-o", str(path)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise ToolchainError(f"building einc's call trampoline failed\n$ {' '.join(command)}\n{done.stderr.strip()}")

    try:
        artifact = cached_artifact("fastcall", key, suffix, build, validate=_import)
    except ToolchainError:
        return None
    return _import(artifact.path)


def _import(path: Path) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader("_einc_fastcall", str(path))
    spec = importlib.util.spec_from_file_location("_einc_fastcall", str(path), loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def make_spec(
    module: ModuleType, address: int, args: Sequence[tuple[str, np.dtype, tuple[int, ...], bool]]
) -> object | None:
    """The trampoline's description of a kernel (its function's address and its arguments
    in order: name, dtype, shape, is_output), or None when it cannot call it (too many
    arguments, a dtype NumPy has no type number for)."""
    if len(args) > MAX_ARGS or any(len(shape) > 32 for _, _, shape, _ in args):
        return None
    rows = [(name, dtype.num, tuple(int(d) for d in shape), is_output) for name, dtype, shape, is_output in args]
    return module.make_spec(address, rows)
