// pi-jail-layout-trace OUT PROG ARGS...: run PROG one instruction at a time
// (ptrace single-step; its main thread only: threads and children run
// untraced) and write to OUT the offset from PROG's load address of each
// instruction of PROG's own code the first time it runs, one hex number a
// line. scripts/pi-jail-layout builds and runs it; slow (~30 us a step).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <sys/user.h>
#include <limits.h>
static unsigned long lo, hi, base;
static void find_map(pid_t pid, const char* exe) {
  char p[64], line[1024], real[PATH_MAX]; snprintf(p, sizeof p, "/proc/%d/maps", pid);
  realpath(exe, real);
  FILE* f = fopen(p, "r");
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b, off; char perm[8]; char path[PATH_MAX] = "";
    if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %s", &a, &b, perm, &off, path) < 4) continue;
    if (strcmp(path, real)) continue;
    if (!base || a - off < base) base = a - off;
    if (perm[2] == 'x') { lo = a; hi = b; }
  }
  fclose(f);
}
int main(int argc, char** argv) {
  if (argc < 3) { fprintf(stderr, "usage: pi-jail-layout-trace OUT PROG [ARG...]\n"); return 2; }
  pid_t pid = fork();
  if (pid == 0) { ptrace(PTRACE_TRACEME, 0, 0, 0); execv(argv[2], argv + 2); _exit(127); }
  int st;
  waitpid(pid, &st, 0);  // stopped at exec
  // Threads share the code (and are traced); a clone with SIGCHLD (the
  // jail, a fork) is reported as a fork, which is not followed.
  ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_EXITKILL | PTRACE_O_TRACECLONE);
  find_map(pid, argv[2]);
  if (hi <= lo) { fprintf(stderr, "pi-jail-layout-trace: %s did not start\n", argv[2]); return 127; }
  size_t n = hi - lo;
  unsigned char* seen = calloc(n, 1);
  FILE* out = fopen(argv[1], "w");
  long steps = 0;
  pid_t tid = pid;
  int sig = 0, main_status = 0;
  for (;;) {
    ptrace(PTRACE_SINGLESTEP, tid, 0, sig);  // fails for a thread gone meanwhile: its exit is reported
    tid = waitpid(-1, &st, __WALL);
    if (tid < 0) break;
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
      if (tid == pid) { main_status = st; break; }
      continue;  // a thread ended: wait for the next stop
    }
    int s = WSTOPSIG(st);
    // A stop for an event (a new thread) or the new thread's first stop
    // is not a signal to deliver.
    sig = (s == SIGTRAP || (s == SIGSTOP && (st >> 16) == 0 && tid != pid)) ? 0 : s;
    if (st >> 16) sig = 0;
    struct user_regs_struct r;
    if (ptrace(PTRACE_GETREGS, tid, 0, &r) != 0) continue;
    ++steps;
    if (r.rip >= lo && r.rip < hi && !seen[r.rip - lo]) {
      seen[r.rip - lo] = 1;
      fprintf(out, "%lx\n", (unsigned long)(r.rip - base));
    }
  }
  fclose(out);
  fprintf(stderr, "steps %ld status %x\n", steps, main_status);
  return WIFEXITED(main_status) ? WEXITSTATUS(main_status) : 128;
}
