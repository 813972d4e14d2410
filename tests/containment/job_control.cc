#include "job_control.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <sstream>
#include <vector>

#include "harness.h"

namespace pj::test::job_control {

namespace {

// One outer bash in tmux, in the launcher's directory, its settings saved.
// Before each prompt the shell appends to a file the last command's status
// and its jobs still running or stopped: that is how the tests know what
// the shell has done, rather than from a prompt on the screen, which shows
// so too while a line just typed waits to be read (what is typed then goes
// to the job), or from the shell's children, which are reaped before the
// shell writes the status.
struct Outer {
  Tmux t;
  std::string before = "../stty-before-" + unique_token();
  std::string prompts_file;
  std::string bytes_file;       // what the pane received, for a failure's message
  size_t prompts_at_start = 0;  // prompts the shell had given when the job was typed
  explicit Outer(const Launcher& l, int width = 100, int height = 30)
      : t("env PS1='outer$ ' " + l.env + " bash --norc --noprofile", width, height),
        prompts_file(l.dir + "/../prompts-" + unique_token()),
        bytes_file(l.dir + "/../pane-" + unique_token()) {
    t.copy_output_to(bytes_file);
    REQUIRE(t.wait_for("outer$"));
    // Set in the shell, not in its environment: the job need not see it.
    // `jobs` and the group's redirection run in the shell: no fork.
    shell("PROMPT_COMMAND='s=$?; { echo $s; jobs -r; jobs -s; echo .; } >> " + prompts_file + "'; cd '" + l.dir +
          "' && stty -a > " + before);
  }
  // For a failure's message: the screen, the last bytes the pane
  // received (whether a line missing from the screen reached tmux at
  // all), and the prompts the shell wrote.
  std::string seen() {
    std::string bytes = read_file(bytes_file);
    if (bytes.size() > 1500) bytes.erase(0, bytes.size() - 1500);
    std::string shown;
    for (unsigned char c : bytes) {
      if (c == '\n')
        shown += "\\n\n";
      else if (c == '\r')
        shown += "\\r";
      else if (c < 0x20 || c >= 0x7f)
        shown += fmt_byte(c);
      else
        shown += static_cast<char>(c);
    }
    return t.screen() + "\n--- the pane's last bytes:\n" + shown + "\n--- prompts (status, jobs):\n" +
           read_file(prompts_file);
  }
  static std::string fmt_byte(unsigned char c) {
    const char* hex = "0123456789abcdef";
    return std::string("\\x") + hex[c >> 4] + hex[c & 15];
  }
  // A prompt: the status of the shell's last command, and whether it had
  // jobs still running or stopped.
  struct Prompt {
    int status = -1;
    bool jobs = false;
  };
  std::vector<Prompt> prompts() {
    std::istringstream in(read_file(prompts_file));
    std::vector<Prompt> records;
    Prompt p;
    bool open = false;
    for (std::string line; std::getline(in, line);) {
      if (!open) {
        p = Prompt{std::stoi(line), false};
        open = true;
      } else if (line == ".") {
        records.push_back(p);
        open = false;
      } else {
        p.jobs = true;
      }
    }
    return records;  // a prompt still being written is left out
  }
  // Type a command for the shell itself and wait until it prompts again.
  void shell(const std::string& line) {
    const size_t n = prompts().size();
    t.type(line);
    bool done = false;
    for (int i = 0; i < 400 && !done; ++i) {
      done = prompts().size() > n;
      if (!done) ::usleep(25000);
    }
    REQUIRE_MESSAGE(done, seen());
  }
  // Run `command` under the launcher. (Not `command; echo $?`: bash goes
  // on with the list when a job stops.)
  void start(const Launcher& l, const std::string& command) {
    start_line((l.prefix.empty() ? "" : l.prefix + " ") + command);
  }
  void start_line(const std::string& line) {
    prompts_at_start = prompts().size();
    t.type(line);
  }
  // Once the shell prompts, since the job was typed, with no job left
  // (stopped or running), the job's status is `code`. Then the prompt is
  // waited for on the screen too: tmux has drawn what the job wrote
  // before it (the record is written before the prompt is printed).
  bool ended_with(int code) {
    for (int i = 0; i < 400; ++i) {
      auto records = prompts();
      if (records.size() > prompts_at_start && !records.back().jobs)
        return prompt_on_screen() && records.back().status == code;
      ::usleep(25000);
    }
    return false;
  }
  bool prompt_on_screen() {
    for (int i = 0; i < 400; ++i) {
      std::string s = t.screen();
      size_t end = s.find_last_not_of(" \n");
      size_t start = s.rfind('\n', end);
      size_t from = start == std::string::npos ? 0 : start + 1;
      if (end != std::string::npos && s.substr(from, end - from + 1) == "outer$") return true;
      ::usleep(25000);
    }
    return false;
  }
  size_t count(const std::string& text) {
    REQUIRE(!text.empty());
    std::string s = t.screen();
    size_t n = 0;
    for (size_t at = s.find(text); at != std::string::npos; at = s.find(text, at + text.size())) ++n;
    return n;
  }
  // Poll until `text` shows at least `n` times (a guard, not a timing check).
  bool shows(const std::string& text, size_t n = 1) {
    for (int i = 0; i < 400; ++i) {
      if (count(text) >= n) return true;
      ::usleep(25000);
    }
    return false;
  }
  void settings_unchanged() {
    std::string after = "../stty-after-" + unique_token();
    t.type("stty -a > " + after + "; cmp " + before + " " + after + " && echo STTY-SAME-$((6*7))");
    CHECK_MESSAGE(t.wait_for("STTY-SAME-42"), seen());
  }
};

// tmux resizes the pane's terminal after resize-window returns: give it
// a moment (what is checked then waits with a guard).
void settle() { ::usleep(300000); }

// bash's job line for a job stopped by SIGTSTP ("Stopped (signal)" is
// SIGSTOP, "Stopped (tty input)" SIGTTIN): the status column is padded.
const std::string kStoppedBySigtstp = "Stopped   ";

}  // namespace

void ctrl_z_then_fg(const Launcher& l, const Program& p) {
  INFO(l.name, ": ", p.command);
  Outer o(l);
  o.start(l, p.command);
  if (!p.warm_up.empty()) o.t.type(p.warm_up);
  REQUIRE_MESSAGE(o.shows(p.ready, p.warm_up == p.ready ? 2 : 1), o.seen());  // typed, then echoed
  o.t.send({"C-z"});
  REQUIRE_MESSAGE(o.shows(kStoppedBySigtstp), o.seen());
  o.t.type("jobs");
  CHECK_MESSAGE(o.shows(kStoppedBySigtstp, 2), o.seen());
  o.t.type("fg");
  // The line is for the resumed job: typed while the shell was still
  // handing the terminal back, it was sometimes lost (seen once bare,
  // without pi-jail: echoed, never answered).
  settle();
  o.t.type(p.after_fg);
  CHECK_MESSAGE(o.shows(p.answer, p.answer == p.after_fg ? 2 : 1), o.seen());
  if (p.eof_ends) o.t.send({"C-d"});
  CHECK_MESSAGE(o.ended_with(0), o.seen());
  o.settings_unchanged();
}

void bg_then_fg(const Launcher& l) {
  INFO(l.name);
  Outer o(l);
  // Ticks until the test makes the file `stop` in the workspace.
  o.start(l, "sh -c 'i=0; while [ ! -e stop ]; do i=$((i+1)); echo tick-$i; sleep 0.1; done; echo ticks-$((6*7))'");
  REQUIRE_MESSAGE(o.shows("tick-3"), o.seen());
  o.t.send({"C-z"});
  REQUIRE_MESSAGE(o.shows(kStoppedBySigtstp), o.seen());
  o.t.type("bg");
  o.t.type("jobs");
  CHECK_MESSAGE(o.shows("Running"), o.seen());
  // It prints on while the shell has the terminal...
  CHECK_MESSAGE(o.shows("tick-25"), o.seen());
  o.t.type("echo shell-answers-$((6*7))");
  CHECK_MESSAGE(o.shows("shell-answers-42"), o.seen());
  // ...and fg waits for it to the end.
  o.t.type("fg");
  CHECK_MESSAGE(o.shows("tick-40"), o.seen());
  write_file(l.dir + "/stop", "");
  CHECK_MESSAGE(o.shows("ticks-42"), o.seen());
  CHECK_MESSAGE(o.ended_with(0), o.seen());
  ::unlink((l.dir + "/stop").c_str());
  o.settings_unchanged();
}

void fg_of_running_job_reads(const Launcher& l) {
  INFO(l.name);
  // Waits for the file `go` in the workspace, then reads a line.
  const std::string program = "sh -c 'touch started; while [ ! -e go ]; do sleep 0.1; done; read x; echo got-$x'";
  auto started = [&] { return exists(l.dir + "/started"); };
  for (bool ampersand : {false, true}) {
    CAPTURE(ampersand);
    ::unlink((l.dir + "/go").c_str());
    ::unlink((l.dir + "/started").c_str());
    Outer o(l);
    o.start(l, program + (ampersand ? " &" : ""));
    if (!ampersand) {
      REQUIRE(eventually(started));
      o.t.send({"C-z"});
      REQUIRE_MESSAGE(o.shows(kStoppedBySigtstp), o.seen());
      o.t.type("bg");
    }
    o.t.type("jobs");
    REQUIRE_MESSAGE(o.shows("Running"), o.seen());
    o.t.type("fg");
    REQUIRE(eventually(started));
    ::usleep(600000);  // pi-jail looks for the foreground every 250 ms: typed earlier, the line would be the shell's
    write_file(l.dir + "/go", "");
    o.t.type("typed-after-fg");
    CHECK_MESSAGE(o.shows("got-typed-after-fg"), o.seen());
    CHECK_MESSAGE(o.ended_with(0), o.seen());
    o.settings_unchanged();
  }
  ::unlink((l.dir + "/go").c_str());
  ::unlink((l.dir + "/started").c_str());
}

void stops_itself(const Launcher& l) {
  INFO(l.name);
  Outer o(l);
  o.start(l, "sh -c 'echo self-$((1+1)); kill -TSTP $$; echo self-$((2+1))'");
  REQUIRE_MESSAGE(o.shows("self-2"), o.seen());
  REQUIRE_MESSAGE(o.shows(kStoppedBySigtstp), o.seen());
  CHECK(o.count("self-3") == 0);
  o.t.type("fg");
  CHECK_MESSAGE(o.shows("self-3"), o.seen());
  CHECK_MESSAGE(o.ended_with(0), o.seen());
  o.settings_unchanged();
}

void ignores_ctrl_z(const Launcher& l) {
  INFO(l.name);
  Outer o(l);
  o.start(l, "sh -c 'trap \"\" TSTP; echo ready-$((6*7)); read x; echo got-$x'");
  REQUIRE_MESSAGE(o.shows("ready-42"), o.seen());
  o.t.send({"C-z"});
  o.t.type("still-reading");
  CHECK_MESSAGE(o.shows("got-still-reading"), o.seen());
  CHECK_MESSAGE(o.ended_with(0), o.seen());
  CHECK(o.count("Stopped") == 0);
  o.settings_unchanged();
}

void pipe_has_no_staircase(const Launcher& l) {
  INFO(l.name);
  Outer o(l);
  o.shell("clear");
  o.start(l, "seq 1 3 | cat");
  REQUIRE_MESSAGE(o.ended_with(0), o.seen());
  std::istringstream lines(o.t.screen());
  std::vector<std::string> seen;
  for (std::string line; std::getline(lines, line);) seen.push_back(line);
  bool three = false;
  for (size_t i = 0; i + 2 < seen.size(); ++i)
    three = three || (seen[i] == "1" && seen[i + 1] == "2" && seen[i + 2] == "3");
  CHECK_MESSAGE(three, o.seen());

  // stdin not the terminal: pi-jail leaves its settings alone, so what
  // another process writes meanwhile is not a staircase either.
  o.shell("clear");
  o.start_line("(sleep 0.5; printf 'other-1\\nother-2\\n') & " + (l.prefix.empty() ? "" : l.prefix + " ") +
               "sleep 1.5 </dev/null");
  REQUIRE_MESSAGE(o.shows("other-2"), o.seen());
  REQUIRE_MESSAGE(o.ended_with(0), o.seen());
  std::istringstream again(o.t.screen());
  bool both = false;
  std::string prev;
  for (std::string line; std::getline(again, line); prev = line)
    both = both || (prev == "other-1" && line == "other-2");
  CHECK_MESSAGE(both, o.seen());
}

void resize_while_stopped(const Launcher& l) {
  INFO(l.name);
  Outer o(l, 100, 30);
  o.start(l, "sh -c 'echo ready-$((6*7)); while read l; do echo size-$(stty size); done'");
  REQUIRE_MESSAGE(o.shows("ready-42"), o.seen());
  o.t.type("");
  REQUIRE_MESSAGE(o.shows("size-30 100"), o.seen());
  o.t.send({"C-z"});
  REQUIRE_MESSAGE(o.shows(kStoppedBySigtstp), o.seen());
  o.t.resize(120, 40);
  settle();
  o.t.type("fg");
  o.t.type("");
  CHECK_MESSAGE(o.shows("size-40 120"), o.seen());
  o.t.resize(110, 35);
  settle();
  o.t.type("");
  CHECK_MESSAGE(o.shows("size-35 110"), o.seen());
  o.t.send({"C-d"});
  CHECK_MESSAGE(o.ended_with(0), o.seen());
  o.t.resize(100, 30);
  o.settings_unchanged();
}

}  // namespace pj::test::job_control
