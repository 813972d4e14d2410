// Job control in a real terminal (tmux), one script for a program run
// bare and under a launcher (pi-jail, or the macOS supervisor with its
// stand-in for sandbox-exec). Each scenario checks what a user sees in
// bash, and is also run bare: what it checks is what bash shows for the
// program without pi-jail, so a launcher passes only by behaving the same.
#pragma once

#include <string>

namespace pj::test::job_control {

struct Launcher {
  std::string name;    // "bare", "pi-jail", ...
  std::string prefix;  // put before the program's command line: "" when bare, else ends with "--"
  std::string env;     // VAR=value words for the outer shell (HOME, the stand-in, ...)
  std::string dir;     // where the outer shell starts (the workspace)
};

// Ctrl-Z on `program` once it shows `ready` (after typing `warm_up`, if
// set): bash prints the job as Stopped (by SIGTSTP), `jobs` lists it,
// `fg` resumes it and it answers `after_fg` with `answer`, then ends
// (after Ctrl-D when `eof_ends`); at the end the outer terminal's
// settings (`stty -a`) are what they were.
struct Program {
  std::string command, warm_up, ready, after_fg, answer;
  bool eof_ends = false;
};
void ctrl_z_then_fg(const Launcher& l, const Program& p);
// Ctrl-Z, `bg`: the job runs on (its output keeps coming, `jobs` says
// Running) without the terminal; `fg` brings it back until it ends.
void bg_then_fg(const Launcher& l);
// A job that runs in the background and then reads the terminal: `fg`
// (which sends no SIGCONT to a running job) gives it the terminal and it
// reads a typed line; the same for one started with `&` (its terminal is
// cooked, not the shell's line-editing mode).
void fg_of_running_job_reads(const Launcher& l);
// A program that stops itself (`kill -TSTP $$`) shows as Stopped; fg
// resumes it.
void stops_itself(const Launcher& l);
// A program that ignores SIGTSTP: Ctrl-Z does nothing, it reads on.
void ignores_ctrl_z(const Launcher& l);
// `... seq 1 3 | cat`: three lines, each at column 0; and another
// writer's lines while the launcher runs with stdin not a terminal.
void pipe_has_no_staircase(const Launcher& l);
// Resized while stopped: after fg the program sees the new size, and a
// resize after that too.
void resize_while_stopped(const Launcher& l);

}  // namespace pj::test::job_control
