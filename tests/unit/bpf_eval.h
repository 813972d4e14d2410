// A classic-BPF interpreter for seccomp filters, so the exported program
// can be judged without the kernel. It knows the instructions libseccomp
// emits and fails loudly on anything else.
#pragma once

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace pj::test {

// `steps`, when given, counts the instructions executed.
inline std::uint32_t bpf_run(const std::vector<sock_filter>& prog, const seccomp_data& data, size_t* steps = nullptr) {
  std::uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {};
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    if (steps) ++*steps;
    const sock_filter& f = prog[pc];
    auto jump = [&](bool cond) { pc += cond ? f.jt : f.jf; };
    switch (f.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (f.k % 4 || f.k + 4 > sizeof data) throw std::runtime_error("bpf: bad load offset");
        std::memcpy(&a, reinterpret_cast<const char*>(&data) + f.k, 4);
        break;
      case BPF_LD | BPF_MEM: a = mem[f.k % BPF_MEMWORDS]; break;
      case BPF_LDX | BPF_MEM: x = mem[f.k % BPF_MEMWORDS]; break;
      case BPF_LD | BPF_IMM: a = f.k; break;
      case BPF_LDX | BPF_IMM: x = f.k; break;
      case BPF_ST: mem[f.k % BPF_MEMWORDS] = a; break;
      case BPF_STX: mem[f.k % BPF_MEMWORDS] = x; break;
      case BPF_ALU | BPF_AND | BPF_K: a &= f.k; break;
      case BPF_ALU | BPF_OR | BPF_K: a |= f.k; break;
      case BPF_ALU | BPF_AND | BPF_X: a &= x; break;
      case BPF_MISC | BPF_TAX: x = a; break;
      case BPF_MISC | BPF_TXA: a = x; break;
      case BPF_JMP | BPF_JA: pc += f.k; break;
      case BPF_JMP | BPF_JEQ | BPF_K: jump(a == f.k); break;
      case BPF_JMP | BPF_JGT | BPF_K: jump(a > f.k); break;
      case BPF_JMP | BPF_JGE | BPF_K: jump(a >= f.k); break;
      case BPF_JMP | BPF_JSET | BPF_K: jump((a & f.k) != 0); break;
      case BPF_JMP | BPF_JEQ | BPF_X: jump(a == x); break;
      case BPF_JMP | BPF_JGT | BPF_X: jump(a > x); break;
      case BPF_JMP | BPF_JGE | BPF_X: jump(a >= x); break;
      case BPF_RET | BPF_K: return f.k;
      case BPF_RET | BPF_A: return a;
      default: throw std::runtime_error("bpf: unknown instruction " + std::to_string(f.code));
    }
  }
  throw std::runtime_error("bpf: ran off the end of the program");
}

}  // namespace pj::test
