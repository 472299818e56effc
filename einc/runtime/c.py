"""Build C kernels with the system compiler, load them with ctypes, call them on NumPy arrays.

Compiler flags (`CFLAGS`), and why:
- `-O3 -march=native -mprefer-vector-width=512`: gcc 12 prefers 256-bit vectors even where
  AVX-512 exists; asking for 512 roughly doubles vectorised throughput there.
- `-fopenmp`: schedules may emit `#pragma omp` loops.
- `-fwrapv`: arith's integers wrap on overflow; C's signed overflow is otherwise undefined.
- `-fno-math-errno`: math functions need not set errno (nothing reads it), so `sqrt` becomes
  one instruction and loops calling it vectorise. Results are unchanged.
- `-ffp-contract=fast` (gcc's GNU-mode default, stated explicitly): `a * b + c` may become
  one fused multiply-add, rounded once. FMA is half of the machine's floating-point peak,
  and the GPU targets contract by default too, so results may differ from the interpreter
  in the last bits of sums of products; compare with a tolerance, or pass
  `extra_flags=("-ffp-contract=off",)` for bit-for-bit agreement.
- No `-ffast-math`: NaN, infinities, signed zeros and evaluation order are kept.
- `-lmvec` (x86-64 glibc only): glibc's vector math library, which loops calling the math
  functions einc's C target declares `__simd__` call (see einc.targets.c).

Extra flags come from the caller (`einc.compile(..., cflags=[...])`, `extra_flags` here) and
from `$EINC_CFLAGS` (split like a shell command line), after `CFLAGS`, so they can add
instrumentation (`-fsanitize=address,undefined`) or override an option (`-O1`).

Libraries are cached by a hash of the source, the compiler's identity (`$CC`, default `cc`,
and its `--version`), the flags and the host CPU (because of `-march=native`). A cached
library is loaded before it is used: one that cannot be loaded is rebuilt.

Thread safety: a loaded kernel may be called from several threads at once (each call
passes its own pointers; an OpenMP region started from several threads gets a team each).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from einc.errors import RuntimeInputError, ToolchainError
from einc.runtime.arrays import aligned_empty
from einc.runtime.cache import cached_artifact, content_key
from einc.runtime.finders import compiler, compiler_identity, first_line, known
from einc.runtime.signature import KernelSignature, check_array, check_no_overlap

CFLAGS: tuple[str, ...] = (
    "-O3",
    "-march=native",
    "-mprefer-vector-width=512",
    "-fopenmp",
    "-fwrapv",
    "-fno-math-errno",
    "-ffp-contract=fast",
    # the schedules jam their own register tiles; GCC's unroll-and-jam of a loop around a
    # vectorized one (a global average pool's spatial loops over its channel vectors, once the
    # tile starts at zero in registers) left the channel loop scalar: 4x slower
    "-fno-loop-unroll-and-jam",
    "-shared",
    "-fPIC",
)
LIBS: tuple[str, ...] = (
    ("-lmvec", "-lm") if platform.machine() == "x86_64" and platform.libc_ver()[0] == "glibc" else ("-lm",)
)


CFLAGS_ENV = "EINC_CFLAGS"


def env_cflags() -> tuple[str, ...]:
    """The flags of `$EINC_CFLAGS`, split like a shell command line."""
    text = os.environ.get(CFLAGS_ENV, "")
    try:
        return tuple(shlex.split(text))
    except ValueError as error:
        raise ToolchainError(f"{CFLAGS_ENV}={text!r} cannot be split into flags: {error}") from error


VECTOR_BITS_ENV = "EINC_C_VECTOR_BITS"
"""Overrides the C target's vector width (128, 256 or 512 bits), e.g. to print the same
source on every machine (the lit goldens use 512)."""


def native_vector_bits() -> int:
    """The width of the vectors the C target makes: `$EINC_C_VECTOR_BITS` when set, else the
    widest vector registers `cc -march=native` enables (512 with AVX-512F, 256 with AVX, 128
    otherwise). Vectors wider than the registers are split by gcc into several operations with
    temporaries in memory: 512-bit vectors on an AVX2 machine ran a blocked matmul 8x slower."""
    override = os.environ.get(VECTOR_BITS_ENV)
    if override:
        if override not in ("128", "256", "512"):
            raise ToolchainError(f"{VECTOR_BITS_ENV}={override!r}: expected 128, 256 or 512")
        return int(override)
    return _march_native_vector_bits(compiler())


@functools.cache
def _march_native_vector_bits(cc: str) -> int:
    try:
        done = subprocess.run([cc, "-march=native", "-dM", "-E", "-x", "c", os.devnull],
                              capture_output=True, text=True, check=True)  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return 128  # no compiler, or it has no -march=native: the baseline every target has
    macros = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("#define ")}
    return 512 if "__AVX512F__" in macros else 256 if "__AVX__" in macros else 128


FMA_BITS_ENV = "EINC_C_FMA_BITS"
"""Overrides the width of the host's FMA datapath (256 or 512 bits; `native_fma_bits`)."""


def native_fma_bits() -> int:
    """The width of the host's float32 FMA datapath, as far as the register tiles care
    (einc.schedule.policies.cpu.register_tile): `$EINC_C_FMA_BITS` when set; else, when
    `$EINC_C_VECTOR_BITS` is set, min(its width, 256), so that a source printed with a fixed
    vector width is the same on every machine (the goldens, the lit tests); else the host's
    (`fma_bits_from_cpuinfo` of /proc/cpuinfo)."""
    override = os.environ.get(FMA_BITS_ENV)
    if override:
        if override not in ("128", "256", "512"):
            raise ToolchainError(f"{FMA_BITS_ENV}={override!r}: expected 128, 256 or 512")
        return int(override)
    vector = native_vector_bits()
    if os.environ.get(VECTOR_BITS_ENV):
        return min(vector, 256)
    return _host_fma_bits(vector)


@functools.cache
def _host_fma_bits(vector_bits: int) -> int:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return fma_bits_from_cpuinfo(cpuinfo.read(), vector_bits)
    except OSError:
        return min(vector_bits, 256)


def fma_bits_from_cpuinfo(text: str, vector_bits: int) -> int:
    """The FMA datapath width of the CPU /proc/cpuinfo `text` describes, whose vectors are
    `vector_bits` wide: 512 on an Intel core with AVX-512 (Skylake-SP to Sapphire/Emerald
    Rapids: 512-bit FMA units, two per core on the server parts), else at most 256 (AMD's
    Zen 4 runs AVX-512 on 256-bit datapaths, each 512-bit FMA taking two; AVX2 hosts; any
    CPU not known here keeps the 256-bit register tiles)."""
    vendor = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("vendor_id")), "")
    if vector_bits >= 512 and vendor == "GenuineIntel":
        return 512
    return min(vector_bits, 256)


@functools.cache
def host_identity() -> str:
    """The CPU model and features, since `-march=native` code is only valid on this CPU."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            wanted = ("model name", "flags")
            lines = [ln for ln in cpuinfo.read().splitlines() if ln.startswith(wanted)]
            return "\n".join(dict.fromkeys(lines))
    except OSError:
        return f"{platform.machine()} {platform.processor()}"


def toolchain_identity(extra_flags: Sequence[str] = ()) -> tuple[str, str]:
    """The compiler kernels are built with (the first line of `$CC --version`) and its flags
    (`CFLAGS`, then `extra_flags`, then `$EINC_CFLAGS`), as tuning records key them. Never
    raises: what cannot be known reads `unknown (why)` (the build itself reports it)."""
    cc = compiler()
    return known(lambda: first_line(compiler_identity(cc))), known(
        lambda: shlex.join((*CFLAGS, *extra_flags, *env_cflags()))
    )


@dataclass(frozen=True)
class CLibrary:
    """A built shared library and the cached source it came from."""

    path: Path
    source_path: Path
    cache_hit: bool


def compile_c(
    source: str, *, cc: str | None = None, extra_flags: Sequence[str] = ()
) -> CLibrary:
    """Compile `source` into a shared library, or reuse the cached one, with `CFLAGS`, then
    `extra_flags`, then `$EINC_CFLAGS`.

    Raises ToolchainError with the compiler's diagnostics and the source's path when the
    compiler rejects it (an einc bug: generated code must compile, unless the extra flags
    are at fault).
    """
    cc = cc or compiler()
    flags = (*CFLAGS, *extra_flags, *env_cflags())
    key = content_key(source, cc, compiler_identity(cc), "\0".join(flags), host_identity())

    def write_source(path: Path) -> None:
        path.write_text(source)

    source_path = cached_artifact("c", key, ".c", write_source).path

    def build(path: Path) -> None:
        command = [cc, *flags, str(source_path), "-o", str(path), *LIBS]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise ToolchainError(
                f"the C compiler rejected the generated kernel {source_path}\n"
                f"$ {' '.join(command)}\n{done.stderr.strip()}"
            )

    library = cached_artifact("c", key, ".so", build, validate=_load)
    return CLibrary(library.path, source_path, library.hit)


def _load(path: Path) -> ctypes.CDLL:
    return ctypes.CDLL(str(path))


class CKernel:
    """A compiled kernel: call it on NumPy arrays, which are passed by pointer (no copies)."""

    def __init__(self, library: CLibrary, signature: KernelSignature):
        self.library = library
        self.signature = signature
        self._dll = _load(library.path)
        self._function = getattr(self._dll, signature.name)
        self._function.argtypes = [ctypes.c_void_p] * len(signature.buffers)
        self._function.restype = None

    def __call__(self, *arrays: np.ndarray) -> None:
        """Run on arrays in argument order (inputs, then outputs, written in place)."""
        if len(arrays) != len(self.signature.buffers):
            raise RuntimeInputError(
                f"kernel '{self.signature.name}' takes {len(self.signature.buffers)} arrays "
                f"({', '.join(b.name for b in self.signature.buffers)}), got {len(arrays)}"
            )
        for spec, array in zip(self.signature.buffers, arrays):
            check_array(spec, array)
        check_no_overlap(self.signature.buffers, arrays)
        self._function(*(a.ctypes.data for a in arrays))

    def fast_call(self) -> tuple[Callable[..., dict[str, object] | None], object]:
        """The fast call and this kernel's spec for it: the C trampoline
        (`einc.runtime.fastcall`), else `ctypes_call` where the trampoline cannot be built
        or cannot call this kernel. Both return None for anything unusual (the caller's
        Python path then converts or refuses the arrays)."""
        from einc.runtime import fastcall

        args = [(b.name, b.dtype, b.shape, b.is_output) for b in self.signature.buffers]
        module = fastcall.load()
        address = ctypes.cast(self._function, ctypes.c_void_p).value
        if module is not None and address is not None:
            spec = fastcall.make_spec(module, address, args)
            if spec is not None:
                return module.call, spec
        return ctypes_call, CtypesSpec(self._function, args)

    def run(
        self,
        inputs: Mapping[str, np.ndarray],
        outputs: Mapping[str, np.ndarray] | None = None,
    ) -> dict[str, np.ndarray]:
        """Run on named inputs; outputs are written into the given arrays or new ones, and
        returned by name."""
        arrays = self.signature.bind(inputs, outputs)
        self._function(*(a.ctypes.data for a in arrays))
        return self.signature.outputs_by_name(arrays)


class CtypesSpec:
    """A kernel for `ctypes_call`: its ctypes function (argtypes set once) and arguments."""

    def __init__(self, function: Callable[..., None], args: Sequence[tuple[str, np.dtype, tuple[int, ...], bool]]):
        self.function = function
        seen: set[str] = set()
        self.args: list[tuple[str, np.dtype, tuple[int, ...], bool, bool]] = []
        for name, dtype, shape, is_output in args:
            self.args.append((name, dtype, tuple(shape), is_output, is_output and name in seen))
            if is_output:
                seen.add(name)
        self.ninputs = sum(1 for a in args if not a[3])
        self.noutputs = len(seen)


def ctypes_call(
    spec: CtypesSpec, inputs: Mapping[str, object], out: Mapping[str, object] | None
) -> dict[str, object] | None:
    """The trampoline's contract in Python, through ctypes: NumPy arrays exactly as the
    kernel takes them, else None. Slower (each array's address is read from Python)."""
    if type(inputs) is not dict or len(inputs) != spec.ninputs:
        return None
    if out is not None and (type(out) is not dict or len(out) != spec.noutputs):
        return None
    pointers: list[int] = []
    spans: list[tuple[int, int, bool]] = []
    result: dict[str, object] = {}
    for name, dtype, shape, is_output, repeat in spec.args:
        if is_output and (out is None or repeat):
            array = aligned_empty(shape, dtype)
        else:
            given = (out if is_output and out is not None else inputs).get(name)
            if type(given) is not np.ndarray or given.dtype != dtype or given.shape != shape:
                return None
            flags = given.flags
            if not (flags.c_contiguous and flags.aligned) or (is_output and not flags.writeable):
                return None
            array = given
        if is_output and not repeat:
            result[name] = array
        pointer = array.__array_interface__["data"][0]
        pointers.append(pointer)
        spans.append((pointer, pointer + array.nbytes, is_output and out is not None and not repeat))
    if out is not None:
        for i, (lo, hi, check) in enumerate(spans):
            if check and lo != hi and any(j != i and l2 != h2 and lo < h2 and l2 < hi for j, (l2, h2, _) in enumerate(spans)):
                return None
    spec.function(*pointers)
    return result


def load_c_kernel(
    source: str,
    signature: KernelSignature,
    *,
    cc: str | None = None,
    extra_flags: Sequence[str] = (),
) -> CKernel:
    """Compile (or fetch from the cache) and load the C source of a kernel."""
    return CKernel(compile_c(source, cc=cc, extra_flags=extra_flags), signature)
