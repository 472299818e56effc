// einc's SYCL shim: a C ABI over the oneAPI kernel_compiler extension, loaded by
// einc/runtime/sycl.py with ctypes. Built once per SYCL runtime version with
//   g++ -std=c++17 -shared -fPIC -I$VENV/include sycl_shim.cpp -L$VENV/lib -lsycl
//
// Every function catches C++ exceptions; failures return a null handle or a non-zero
// status and set `*error` to a malloc'd message the caller frees with
// einc_sycl_string_free.

#define SYCL_DISABLE_FSYCL_SYCLHPP_WARNING 1
#include <sycl/sycl.hpp>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace syclexp = sycl::ext::oneapi::experimental;

namespace {

char *copy_string(const std::string &text) {
  char *out = static_cast<char *>(std::malloc(text.size() + 1));
  if (out != nullptr) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

void set_error(char **error, const std::string &message) {
  if (error != nullptr) *error = copy_string(message);
}

// Errors raised by asynchronous work (a failed launch) surface at wait_and_throw().
void async_handler(sycl::exception_list errors) {
  for (const std::exception_ptr &e : errors) std::rethrow_exception(e);
}

bool is_intel_opencl_cpu(const sycl::device &d) {
  if (!d.is_cpu() || d.get_backend() != sycl::backend::opencl) return false;
  std::string vendor = d.get_platform().get_info<sycl::info::platform::vendor>();
  return vendor.find("Intel") != std::string::npos;
}

struct Bundle {
  sycl::kernel_bundle<sycl::bundle_state::executable> executable;
};

}  // namespace

extern "C" {

void einc_sycl_string_free(char *text) { std::free(text); }

// An in-order queue on Intel's OpenCL CPU device (SYCL runtime compilation fails on PoCL).
void *einc_sycl_queue_create(char **error) {
  try {
    std::string seen;
    for (const sycl::platform &p : sycl::platform::get_platforms()) {
      for (const sycl::device &d : p.get_devices()) {
        if (is_intel_opencl_cpu(d))
          return new sycl::queue(d, async_handler, sycl::property::queue::in_order());
        seen += "\n  " + p.get_info<sycl::info::platform::name>() + ": " +
                d.get_info<sycl::info::device::name>();
      }
    }
    set_error(error, "no Intel OpenCL CPU device; SYCL sees:" + (seen.empty() ? " nothing" : seen));
  } catch (const std::exception &e) {
    set_error(error, e.what());
  }
  return nullptr;
}

void einc_sycl_queue_destroy(void *queue) { delete static_cast<sycl::queue *>(queue); }

char *einc_sycl_device_name(void *queue) {
  auto &q = *static_cast<sycl::queue *>(queue);
  return copy_string(q.get_device().get_info<sycl::info::device::name>() + " (" +
                     q.get_device().get_platform().get_info<sycl::info::platform::name>() + ")");
}

// Compile SYCL source at run time. On failure `*error` holds the clang diagnostics.
void *einc_sycl_bundle_build(void *queue, const char *source, const char *const *options,
                             int n_options, char **log, char **error) {
  auto &q = *static_cast<sycl::queue *>(queue);
  std::string build_log;
  try {
    if (!q.get_device().ext_oneapi_can_compile(syclexp::source_language::sycl)) {
      set_error(error, "the device cannot compile SYCL source (kernel_compiler extension)");
      return nullptr;
    }
    auto source_bundle = syclexp::create_kernel_bundle_from_source(
        q.get_context(), syclexp::source_language::sycl, std::string(source));
    std::vector<std::string> flags(options, options + n_options);
    auto executable = syclexp::build(
        source_bundle, std::vector<sycl::device>{q.get_device()},
        syclexp::properties{syclexp::build_options{flags}, syclexp::save_log{&build_log}});
    if (log != nullptr) *log = copy_string(build_log);
    return new Bundle{executable};
  } catch (const std::exception &e) {
    std::string message = e.what();
    if (!build_log.empty() && message.find(build_log) == std::string::npos)
      message += "\n" + build_log;
    set_error(error, message);
  }
  return nullptr;
}

void einc_sycl_bundle_destroy(void *bundle) { delete static_cast<Bundle *>(bundle); }

void *einc_sycl_kernel_get(void *bundle, const char *name, char **error) {
  auto &b = *static_cast<Bundle *>(bundle);
  try {
    if (!b.executable.ext_oneapi_has_kernel(name)) {
      set_error(error, std::string("the built SYCL source has no kernel '") + name + "'");
      return nullptr;
    }
    return new sycl::kernel(b.executable.ext_oneapi_get_kernel(name));
  } catch (const std::exception &e) {
    set_error(error, e.what());
  }
  return nullptr;
}

void einc_sycl_kernel_destroy(void *kernel) { delete static_cast<sycl::kernel *>(kernel); }

void *einc_sycl_malloc_device(void *queue, size_t bytes, char **error) {
  auto &q = *static_cast<sycl::queue *>(queue);
  try {
    void *p = sycl::malloc_device(bytes == 0 ? 1 : bytes, q);
    if (p == nullptr) set_error(error, "sycl::malloc_device failed");
    return p;
  } catch (const std::exception &e) {
    set_error(error, e.what());
  }
  return nullptr;
}

void einc_sycl_free(void *queue, void *pointer) {
  sycl::free(pointer, *static_cast<sycl::queue *>(queue));
}

// Whether the device's kernels may use memory from the system allocator (a NumPy array)
// as it is (SYCL 2020 aspect::usm_system_allocations: Intel's OpenCL CPU device has it).
int einc_sycl_system_memory(void *queue) {
  try {
    return static_cast<sycl::queue *>(queue)->get_device().has(sycl::aspect::usm_system_allocations) ? 1 : 0;
  } catch (const std::exception &) {
    return 0;
  }
}

// Enqueue a copy on the in-order queue; does not wait (einc_sycl_wait does, after the
// call's launches and read-backs).
int einc_sycl_memcpy(void *queue, void *dst, const void *src, size_t bytes, char **error) {
  auto &q = *static_cast<sycl::queue *>(queue);
  try {
    if (bytes != 0) q.memcpy(dst, src, bytes);
    return 0;
  } catch (const std::exception &e) {
    set_error(error, e.what());
  }
  return 1;
}

// Launch `kernel` with USM pointer arguments over an nd_range given in the manifest's
// (x, y, z) order: x is SYCL dimension 2, the fastest-varying one, as in CUDA.
// Does not wait. (No dynamic work-group memory: with this runtime, a free-function kernel
// calling syclexp::get_work_group_scratch_memory() crashes the runtime compiler.)
int einc_sycl_launch(void *queue, void *kernel, int n_args, void *const *args,
                     const size_t *grid, const size_t *block, char **error) {
  auto &q = *static_cast<sycl::queue *>(queue);
  auto &k = *static_cast<sycl::kernel *>(kernel);
  try {
    sycl::range<3> local{block[2], block[1], block[0]};
    sycl::range<3> global{grid[2] * block[2], grid[1] * block[1], grid[0] * block[0]};
    sycl::nd_range<3> range{global, local};
    q.submit([&](sycl::handler &h) {
      for (int i = 0; i < n_args; ++i) h.set_arg(i, args[i]);
      h.parallel_for(range, k);
    });
    return 0;
  } catch (const std::exception &e) {
    set_error(error, e.what());
  }
  return 1;
}

int einc_sycl_wait(void *queue, char **error) {
  try {
    static_cast<sycl::queue *>(queue)->wait_and_throw();
    return 0;
  } catch (const std::exception &e) {
    set_error(error, e.what());
  }
  return 1;
}

}  // extern "C"
