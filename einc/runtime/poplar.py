"""Run generated Graphcore Poplar programs on NumPy arrays, on a CPU mirror of the Poplar API.

No Graphcore SDK can be installed here, so `einc/runtime/poplar_sdk/` holds a small mirror
of the parts of the API a codelet and a host program use (Vertex, MultiVertex, Input/Output/
InOut, Vector, Graph, Tensor views, program::Sequence/Execute/Copy/Repeat, Engine, IPUModel):
headers (`include/poplar/`: the declarations, and what a codelet's compute() runs: field
access and its bounds check) and their implementation (`src/*.cpp`: the Graph, the tensor
views, the Engine and its checks, the host program), which g++ compiles once per cache into
`<cache>/poplar-mirror/<key>.so` (`_mirror_library`). Each kernel is the printer's source and
a generated host table (`harness_source`) compiled with g++ against the precompiled headers
into a shared library that links the mirror's (cached on disk by content hash), called with
ctypes.

Contract with the Poplar printer: one source text with two parts.

1. Codelets (device code, what `popc` compiles): `#include <poplar/Vertex.hpp>`, then one
   class per vertex type, at global scope, not a template, public fields only:

       class EincAdd : public poplar::Vertex {       // or poplar::MultiVertex
       public:
         poplar::Input<poplar::Vector<float>> a;     // 1-D edges, any layout arguments
         poplar::Input<poplar::Vector<float>> b;
         poplar::Output<poplar::Vector<float>> c;
         unsigned n;                                 // plain field: setInitialValue
         bool compute() {                            // MultiVertex: compute(unsigned workerId)
           for (unsigned i = 0; i < n; ++i) c[i] = a[i] + b[i];
           return true;
         }
       };

   Edges may also be scalar (`Input<float>`) or lists of edges
   (`Vector<Input<Vector<float>>>`, connected to a 2-D tensor's rows or a vector of
   tensors). Types: float, half, int, unsigned, short, unsigned short, (signed/unsigned)
   char, bool, long long; no double (the IPU has no float64: legalize with storage_dtype).

2. The host part, inside `#ifdef EINC_POPLAR_HOST ... #endif`: includes of
   `<poplar/Graph.hpp>` and `<poplar/Program.hpp>`; one registration per vertex class,
   naming every field,

       EINC_POPLAR_VERTEX(EincAdd, a, b, c, n)

   (the mirror has no codelet compiler to read field names from; with Graphcore's SDK the
   harness defines the macro empty); and the graph description

       void einc_build_graph(poplar::Graph &graph,
                             const std::vector<poplar::Tensor> &buffers,
                             poplar::program::Sequence &prog);

   `buffers` holds one variable per manifest buffer, in `LaunchManifest.buffers` order
   (inputs, outputs and temps alike), of the buffer's storage type and shape, named by the
   buffer, not yet mapped to tiles. The function maps every tensor it is given or adds to
   tiles (`graph.setTileMapping`), adds compute sets (one per manifest kernel, named by
   `KernelLaunch.name`; grid and block are unused) with vertices mapped to tiles and every
   listed field connected or set, and appends the programs to `prog` in order
   (`prog.add(poplar::program::Execute(cs))`). It must not add host streams; the harness
   writes the inputs, runs `prog` once and reads the outputs.

The mirror's Engine rejects what Poplar would (unmapped tensors or vertices, unconnected
fields, type mismatches, a tile whose vertices' fields in one compute set take more than
`Target::getBytesPerTile()`, 624 KiB, counted in 8-byte units as einc's printer counts them)
and what would race on the IPU (two vertices of one compute set writing one element or one
32-bit word, or one reading what another writes); it runs every vertex of a compute set one
after another, the workers of a MultiVertex too, and a vertex indexing a 1-D field past its
connected elements fails the run: the bounds check is always on, so a vertex connected to a
slice of an input (einc/targets/poplar.py connects split kernels' vertices so) never reads
outside it unnoticed. `PoplarKernel.graph()`
returns the graph as the mirror recorded it (each vertex's compute set, type, tile and the
elements each field is connected to), without running it. When `popc` is on PATH, the codelet part is also
compiled with it (`popc -O2`, EINC_POPLAR_HOST undefined) as a check; that path is untested
here.

Several kernels may be loaded in one process: they share the mirror's library, which holds
no state of its own, and each keeps its vertex types (EINC_POPLAR_VERTEX registers into a
table with hidden visibility, one per kernel library, that the Graph the kernel's harness
constructs reads), so two kernels may name a vertex type alike.

Thread safety: every call builds its own graph, engine and device (the only state outside
them, the kernel's table of vertex types, is filled when its library is loaded and only read
afterwards), so a kernel may be called from several threads at once.
"""

from __future__ import annotations

import ctypes
import functools
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from einc.errors import RuntimeMissingError, TargetError, ToolchainError
from einc.runtime.cache import cached_artifact, content_key
from einc.runtime.device import check_manifest, stage, storage_dtype
from einc.runtime.manifest import LaunchManifest
from einc.runtime.finders import cxx_compiler, first_line, known, tool_version

SDK_INCLUDE = Path(__file__).with_name("poplar_sdk") / "include"
SDK_SOURCES = Path(__file__).with_name("poplar_sdk") / "src"
# -O1: as quick to compile as -O0 here, and it inlines the mirror's bounds-checked field
# indexing: a 1024x512x512 matmul runs in 3 s instead of two minutes at -O0.
# -Wno-init-list-lifetime: ArrayRef views braced lists, as Poplar's does.
CXXFLAGS: tuple[str, ...] = (
    "-std=c++17", "-O1", "-fPIC", "-Wno-attributes", "-Wno-init-list-lifetime", "-DEINC_POPLAR_HOST",
)  # fmt: skip
# The mirror's library (SDK_SOURCES: Graph, Tensor, Engine, ... compiled once per cache).
LIBRARY_FLAGS: tuple[str, ...] = ("-std=c++17", "-O2", "-fPIC", "-Wno-attributes", "-Wno-init-list-lifetime")
LIBRARY_KIND = "poplar-mirror"
# The mirror's headers (declarations and what a codelet's compute() runs) and the standard
# headers the harness and the printer's source include: parsed once, precompiled.
PCH_HEADERS: tuple[str, ...] = (
    "algorithm", "cmath", "cstddef", "cstdio", "string", "vector",
    "poplar/EincHarness.hpp", "poplar/Engine.hpp", "poplar/Graph.hpp", "poplar/IPUModel.hpp", "poplar/Program.hpp",
    "poplar/Vertex.hpp",
)  # fmt: skip
POPC_FLAGS: tuple[str, ...] = ("-O2",)

POPLAR_TYPES: dict[str, str] = {
    "float32": "FLOAT",
    "float16": "HALF",
    "bfloat16": "UNSIGNED_SHORT",  # its bits (einc.targets.bfloat16): the IPU's arithmetic has no bfloat16
    "int32": "INT",
    "uint32": "UNSIGNED_INT",
    "int16": "SHORT",
    "uint16": "UNSIGNED_SHORT",
    "int8": "SIGNED_CHAR",
    "uint8": "UNSIGNED_CHAR",
    "bool": "BOOL",
    "int64": "LONGLONG",
    "uint64": "UNSIGNED_LONGLONG",
}

ERROR_BYTES = 8192


def harness_source(manifest: LaunchManifest) -> str:
    """The generated host program: the manifest's buffers as a table (name, Poplar type,
    rank, role, bytes; their dimensions in `einc_dims`) and two exports that hand it, with
    the printer's `einc_build_graph` and the kernel's vertex types, to the mirror's library
    (poplar/EincHarness.hpp): `int einc_poplar_run(void *const *host, char *error, size_t
    error_size)` (host pointers in manifest buffer order, null for temps: variables, the
    graph, host streams, one run) and `int einc_poplar_graph(char *out, size_t size)`, the
    graph without running it, described by `poplar::einc::describe` (a line per vertex,
    VertexRecord)."""
    roles = {"input": "Input", "output": "Output", "temp": "Temp"}
    dims = [str(d) for buffer in manifest.buffers for d in buffer.shape]
    table = []
    for buffer in manifest.buffers:
        dtype = storage_dtype(buffer)
        size = int(np.prod(buffer.shape, dtype=np.int64)) * dtype.itemsize
        table.append(
            f'    {{"{buffer.name}", &poplar::{_poplar_type(buffer.name, dtype)}, {len(buffer.shape)}, '
            f"poplar::einc::HarnessBuffer::Role::{roles[buffer.role]}, {size}}},"
        )
    harness = f"{{poplar::einc::vertex_types, einc_build_graph, einc_buffers, {len(table)}, einc_dims}}"
    lines = [
        "// generated by einc/runtime/poplar.py",
        "#include <cstddef>",
        "#include <vector>",
        '#include "kernel.cpp"',
        "#include <poplar/EincHarness.hpp>",
        "",
        f"static const std::size_t einc_dims[] = {{{', '.join([*dims, '0'])}}};  // and a 0: never empty",
        "static const poplar::einc::HarnessBuffer einc_buffers[] = {",
        *(table or ['    {"", &poplar::FLOAT, 0, poplar::einc::HarnessBuffer::Role::Temp, 0},  // none: never empty']),
        "};",
        "",
        'extern "C" int einc_poplar_graph(char *out, std::size_t size) {',
        f"  return poplar::einc::describe_harness({harness}, out, size);",
        "}",
        "",
        'extern "C" int einc_poplar_run(void *const *host, char *error, std::size_t error_size) {',
        f"  return poplar::einc::run_harness({harness}, host, error, error_size);",
        "}",
        "",
    ]
    return "\n".join(lines)


def _poplar_type(name: str, dtype: np.dtype) -> str:
    if dtype.name not in POPLAR_TYPES:
        raise TargetError(
            f"Poplar buffer '{name}' is {dtype.name}, which the IPU has no type for "
            "(legalize it with a storage_dtype, e.g. float32 for float64)"
        )
    return POPLAR_TYPES[dtype.name]


@functools.cache
def _sdk_identity() -> str:
    """The mirror's headers and sources, part of the cache keys (editing them rebuilds)."""
    root = SDK_INCLUDE.parent
    files = sorted([*SDK_INCLUDE.rglob("*.hpp"), *SDK_SOURCES.glob("*.cpp")])
    return content_key(*(f"{p.relative_to(root)}\0{p.read_text()}" for p in files))


def toolchain_identity() -> tuple[str, str]:
    """The C++ compiler of the mirror's kernels (its version, and the mirror's own digest) and
    their flags, as tuning records key them."""
    def compiler() -> str:
        cxx = cxx_compiler()
        return "no C++ compiler" if cxx is None else f"{first_line(tool_version(cxx))}, mirror {_sdk_identity()[:12]}"

    return known(compiler), shlex.join(CXXFLAGS)


def _check_with_popc(source: str) -> None:
    popc = shutil.which("popc")
    if popc is None:
        return
    with tempfile.TemporaryDirectory(prefix="einc-popc-") as tmp:
        path = Path(tmp) / "kernel.cpp"
        path.write_text(source)
        command = [popc, *POPC_FLAGS, str(path), "-o", str(Path(tmp) / "kernel.gp")]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise ToolchainError(
                f"popc rejected the generated codelets\n$ {' '.join(command)}\n{done.stderr.strip()}"
            )


def _precompiled_header(cxx: str) -> Path:
    """A header including the whole mirror, precompiled beside it (`<header>.gch`), cached.
    g++ uses it for `-include <header>` when the flags match, and silently parses the
    headers instead when they do not."""
    text = "".join(f"#include <{h}>\n" for h in PCH_HEADERS)
    key = content_key(text, _sdk_identity(), cxx, tool_version(cxx), "\0".join(CXXFLAGS))

    def write_header(path: Path) -> None:
        path.write_text(text)

    header = cached_artifact("poplar-pch", key, ".hpp", write_header).path

    def build(path: Path) -> None:
        command = [cxx, *CXXFLAGS, f"-I{SDK_INCLUDE}", "-x", "c++-header", str(header), "-o", str(path)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise ToolchainError(f"precompiling einc's Poplar mirror failed\n$ {' '.join(command)}\n{done.stderr}")

    cached_artifact("poplar-pch", key, ".hpp.gch", build)
    return header


def _mirror_library(cxx: str) -> Path:
    """The mirror's implementation (SDK_SOURCES) as one shared library, built once per cache
    (`<cache>/poplar-mirror/<key>.so`, its soname `<key>.so`): every kernel's harness links
    it and finds it through its rpath, `$ORIGIN/../poplar-mirror`."""
    key = content_key(_sdk_identity(), cxx, tool_version(cxx), "\0".join(LIBRARY_FLAGS))

    def build(path: Path) -> None:
        sources = [str(p) for p in sorted(SDK_SOURCES.glob("*.cpp"))]
        command = [
            cxx, *LIBRARY_FLAGS, "-shared", f"-Wl,-soname,{key}.so", f"-I{SDK_INCLUDE}", *sources, "-o", str(path),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise ToolchainError(f"building einc's Poplar mirror failed\n$ {' '.join(command)}\n{done.stderr}")

    return cached_artifact(LIBRARY_KIND, key, ".so", build).path


def build_poplar(source: str, manifest: LaunchManifest) -> Path:
    """The harness library for `source` and `manifest`, built with g++ or taken from the cache.
    It holds the codelets, the graph and the harness; the mirror's Graph, Engine and tensor
    views are in `_mirror_library`, which it links."""
    cxx = cxx_compiler()
    if cxx is None:
        raise RuntimeMissingError("the Poplar harness needs a C++ compiler (g++)")
    harness = harness_source(manifest)
    library = _mirror_library(cxx)
    key = content_key(source, harness, library.name, _sdk_identity(), cxx, tool_version(cxx), "\0".join(CXXFLAGS))

    def build(path: Path) -> None:
        _check_with_popc(source)
        with tempfile.TemporaryDirectory(prefix="einc-poplar-") as tmp:
            (Path(tmp) / "kernel.cpp").write_text(source)
            (Path(tmp) / "harness.cpp").write_text(harness)
            command = [
                cxx, *CXXFLAGS, "-shared", f"-I{SDK_INCLUDE}", f"-I{tmp}", "-include", str(_precompiled_header(cxx)),
                str(Path(tmp) / "harness.cpp"), str(library), f"-Wl,-rpath,$ORIGIN/../{LIBRARY_KIND}", "-o", str(path),
            ]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise ToolchainError(
                    "g++ rejected the generated Poplar program (codelets and graph, built "
                    f"against einc's Poplar mirror)\n$ {' '.join(command)}\n{done.stderr.strip()}\n"
                    f"--- source ---\n{source}"
                )

    return cached_artifact("poplar", key, ".so", build, validate=_load).path


def _load(path: Path) -> ctypes.CDLL:
    return ctypes.CDLL(str(path))


@dataclass(frozen=True)
class FieldRecord:
    """The elements of one tensor a vertex field is connected to: first..last, how many."""

    tensor: str
    first: int
    last: int
    count: int
    writes: bool


@dataclass(frozen=True)
class VertexRecord:
    """One vertex of a recorded graph: its compute set, type, tile and connected fields
    (plain fields, like `einc_begin`, have no record)."""

    compute_set: str
    type: str
    tile: int
    fields: dict[str, FieldRecord]

    @classmethod
    def parse(cls, line: str) -> VertexRecord:
        compute_set, vertex_type, tile, *fields = line.split("\t")
        records = {}
        for field in fields:
            name, _, value = field.partition("=")
            if value:
                tensor, first, last, count, mode = value.split(":")
                records[name] = FieldRecord(tensor, int(first), int(last), int(count), mode == "w")
        return cls(compute_set, vertex_type, int(tile), records)


class PoplarKernel:
    """A Poplar program built against the mirror; call it as `kernel(inputs, outputs)`."""

    def __init__(self, source: str, manifest: LaunchManifest):
        check_manifest(manifest)
        self.source = source
        self.manifest = manifest
        self.library_path = build_poplar(source, manifest)
        self._dll = _load(self.library_path)
        self._run = self._dll.einc_poplar_run
        self._run.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_size_t]
        self._run.restype = ctypes.c_int

    def __call__(self, inputs: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray]) -> None:
        staged = stage(self.manifest, inputs, outputs)
        pointers = (ctypes.c_void_p * max(len(self.manifest.buffers), 1))(
            *(staged.host[b.name].ctypes.data if b.role != "temp" else None for b in self.manifest.buffers)
        )
        error = ctypes.create_string_buffer(ERROR_BYTES)
        if self._run(pointers, error, ERROR_BYTES) != 0:
            raise ToolchainError(
                "the Poplar program failed on einc's Poplar mirror: "
                f"{error.value.decode(errors='replace')}"
            )
        staged.finish()

    def graph(self) -> list[VertexRecord]:
        """Every vertex of the graph the program builds, as the mirror recorded it."""
        describe = self._dll.einc_poplar_graph
        describe.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        describe.restype = ctypes.c_int
        size = 1 << 24
        out = ctypes.create_string_buffer(size)
        if describe(out, size) != 0:
            raise ToolchainError(f"building the Poplar graph failed: {out.value.decode(errors='replace')}")
        return [VertexRecord.parse(line) for line in out.value.decode().splitlines()]


def load_poplar_kernel(source: str, manifest: LaunchManifest) -> PoplarKernel:
    """Build (or reuse) the Poplar program with the harness and return its runner."""
    return PoplarKernel(source, manifest)


@functools.cache
def toolchain_check() -> tuple[bool, str]:
    """Whether Poplar codelets can run here (g++ for the CPU mirror; popc if present), and a
    one-line reason (einc.targets.toolchains)."""
    popc = shutil.which("popc")
    cxx = cxx_compiler()
    if cxx is None:
        return False, "Poplar: no C++ compiler (g++) to build the codelet harness"
    if popc is not None:
        return True, f"Poplar: popc at {popc}; codelets run on einc's CPU mirror with {cxx}"
    return True, f"Poplar: einc's CPU mirror of the Poplar API, built with {cxx} (no popc)"
