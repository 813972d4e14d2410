// pj-filter-gen OUTPUT: compiles the syscall tables (syscall_table.cc)
// with libseccomp, as the jail would at run time, for every variant of
// the switches and for init, and writes them to OUTPUT as a C++ source of
// constant arrays (filter_programs.h declares them). meson runs it at
// build time; a failure fails the build.
#include <seccomp.h>

#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "linuxjail/syscall_filter.h"

namespace {

using pj::linuxjail::BpfProgram;

// The kernel refuses longer programs (BPF_MAXINSNS), and sock_fprog
// counts instructions in an unsigned short.
constexpr std::size_t kMaxInstructions = BPF_MAXINSNS;

bool append_array(std::string& out, const std::string& name, const pj::util::Result<BpfProgram>& program,
                  const std::string& what) {
  if (!program) {
    std::fprintf(stderr, "pj-filter-gen: %s: %s\n", what.c_str(), program.error().message().c_str());
    return false;
  }
  if (program->empty() || program->size() > kMaxInstructions) {
    std::fprintf(stderr, "pj-filter-gen: %s: %zu instructions (the kernel takes 1 to %zu)\n", what.c_str(),
                 program->size(), kMaxInstructions);
    return false;
  }
  out += fmt::format("// {}: {} instructions\nconstexpr sock_filter {}[] = {{\n", what, program->size(), name);
  for (const sock_filter& f : program.value())
    out += fmt::format("    {{0x{:04x}, {}, {}, 0x{:08x}}},\n", f.code, f.jt, f.jf, f.k);
  out += "};\n\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  namespace lj = pj::linuxjail;
  if (argc != 2) {
    std::fprintf(stderr, "usage: pj-filter-gen OUTPUT.cc\n");
    return 2;
  }
  const scmp_version* v = seccomp_version();
  std::string out = fmt::format(
      "// Generated at build time by pj-filter-gen (lib/linuxjail/filter_gen.cc)\n"
      "// from the tables in lib/linuxjail/syscall_table.cc, compiled with\n"
      "// libseccomp {}.{}.{}. Do not edit: change the tables.\n"
      "#include \"linuxjail/filter_programs.h\"\n\n"
      "namespace pj::linuxjail::built_in {{\n\nnamespace {{\n\n",
      v->major, v->minor, v->micro);
  std::string list;
  for (std::size_t variant = 0; variant < lj::kFilterVariants; ++variant) {
    const lj::SeccompOptions opts = lj::variant_options(variant);
    const std::string what =
        fmt::format("command filter, variant {} (debugging {}, nested user namespaces {})", variant,
                    opts.debugging == lj::Debugging::allowed ? "allowed" : "denied",
                    opts.nested_userns == lj::NestedUserns::unsafe_allowed ? "unsafe_allowed" : "denied");
    if (lj::filter_variant(opts) != variant) {
      std::fprintf(stderr, "pj-filter-gen: %s: filter_variant() and variant_options() disagree\n", what.c_str());
      return 1;
    }
    const std::string name = fmt::format("kCommand{}", variant);
    if (!append_array(out, name, lj::compile_command_filter(opts), what)) return 1;
    list += fmt::format("{}{}", list.empty() ? "" : ", ", name);
  }
  if (!append_array(out, "kInit", lj::compile_init_filter(), "init's filter")) return 1;
  out += fmt::format(
      "}}  // namespace\n\n"
      "constinit const std::span<const sock_filter> command_programs[kFilterVariants] = {{{}}};\n"
      "constinit const std::span<const sock_filter> init_program = kInit;\n\n"
      "}}  // namespace pj::linuxjail::built_in\n",
      list);

  std::FILE* f = std::fopen(argv[1], "w");
  if (!f) {
    std::perror(argv[1]);
    return 1;
  }
  const bool written = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  if (std::fclose(f) != 0 || !written) {
    std::perror(argv[1]);
    std::remove(argv[1]);
    return 1;
  }
  return 0;
}
