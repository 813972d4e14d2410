// Reading files the jail can write: no symlink followed, no FIFO waited
// on, no file read past its cap.
#include <dirent.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#ifdef __linux__
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <cstddef>

#include <linux/capability.h>

#include "util/openat2.h"
#endif

#include "util/dir_names.h"
#include "util/untrusted.h"
#include "temp_dir.h"

using namespace pj::util;

namespace {

struct TempDir : pj::test::TempDir {
  void write(const std::string& rel, const std::string& text) const { std::ofstream(path + "/" + rel) << text; }
};

#ifdef __linux__
// In a forked child: system call `nr` fails with `err` from now on (a
// seccomp filter, as an outer sandbox or an old kernel would have it).
// The filter does not check the architecture: it only has to hold for
// this test's own calls.
bool refuse_syscall(long nr, int err) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(nr), 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// `work` run in a forked child with system call `nr` refused with `err`
// (nr -1: none refused); its lines, or {"refuse failed"}.
template <typename F>
std::vector<std::string> in_child_refusing(long nr, int err, F work) {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(p[0]);
    std::string out;
    if (nr >= 0 && !refuse_syscall(nr, err)) {
      out = "refuse failed\n";
    } else {
      for (const auto& line : work()) out += line + "\n";
    }
    for (size_t done = 0; done < out.size();) {
      ssize_t n = ::write(p[1], out.data() + done, out.size() - done);
      if (n <= 0) ::_exit(1);
      done += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(p[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(text.substr(at, nl - at));
  return lines;
}

bool have_openat2() {
  int fd = pj::util::openat2(AT_FDCWD, "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC, RESOLVE_NO_SYMLINKS);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}
#endif

// "rel: inode" or "rel: ERRNO" for a directory opened (or not).
std::string outcome(const std::string& rel, const Result<UniqueFd>& r) {
  if (!r) return rel + ": " + errno_name(r.error().err());
  struct stat st;
  if (::fstat(r->get(), &st) != 0) return rel + ": fstat failed";
  return rel + ": " + std::to_string(st.st_ino) + (S_ISDIR(st.st_mode) ? " dir" : " not a dir");
}

// A tree with every way a directory path can go wrong.
struct TrickyTree {
  TempDir d;
  TrickyTree() {
    std::filesystem::create_directories(d.path + "/a/b/c");
    d.write("a/file", "x");
    REQUIRE(::mkfifo((d.path + "/a/fifo").c_str(), 0600) == 0);
    REQUIRE(::symlink("b", (d.path + "/a/rel").c_str()) == 0);
    REQUIRE(::symlink((d.path + "/a/b").c_str(), (d.path + "/a/abs").c_str()) == 0);
    REQUIRE(::symlink("..", (d.path + "/a/up").c_str()) == 0);
    REQUIRE(::symlink("/proc/self/cwd", (d.path + "/a/magic").c_str()) == 0);
    REQUIRE(::symlink("nowhere", (d.path + "/a/dangling").c_str()) == 0);
  }
  static inline const std::vector<std::string> rels = {
      // Directories, however written.
      "",
      ".",
      "a",
      "a/b/c",
      "./a//b/",
      "a/b/c/",
      "/a/b",
      // Symlinks at the end or on the way: relative, absolute, "..", magic, dangling.
      "a/rel",
      "a/rel/c",
      "a/abs",
      "a/abs/c",
      "a/up",
      "a/up/a",
      "a/magic",
      "a/dangling",
      // Not a directory, or missing.
      "a/file",
      "a/file/x",
      "a/fifo",
      "a/missing",
      "a/missing/c",
      "missing",
      // "..", after a directory, a missing name or a symlink.
      "a/b/..",
      "a/../a",
      "missing/../a",
      "a/rel/..",
      "..",
  };
  // Every rel opened beneath the tree and as an absolute path.
  std::vector<std::string> outcomes() const {
    std::vector<std::string> out;
    auto top = open_dir_nofollow(d.path);
    if (!top) return {"open the tree failed"};
    for (const auto& rel : rels) {
      out.push_back("beneath " + outcome(rel, open_dir_beneath(top->get(), rel)));
      out.push_back("absolute " + outcome(rel, open_dir_nofollow(d.path + "/" + rel)));
    }
    return out;
  }
};

}  // namespace

TEST_CASE("read_untrusted_file reads a small regular file and says absent for a missing one") {
  TempDir d;
  std::filesystem::create_directories(d.path + "/a/b");
  d.write("a/b/f", "hello\n");
  auto r = read_untrusted_file(d.path + "/a/b/f", 100);
  REQUIRE(r);
  REQUIRE(r->has_value());
  CHECK(**r == "hello\n");
  auto missing = read_untrusted_file(d.path + "/a/b/nope", 100);
  REQUIRE(missing);
  CHECK_FALSE(missing->has_value());
  auto missing_dir = read_untrusted_file(d.path + "/nope/f", 100);
  REQUIRE(missing_dir);
  CHECK_FALSE(missing_dir->has_value());
}

TEST_CASE("read_untrusted_file refuses a symlink at the end or on the way") {
  TempDir d;
  std::filesystem::create_directories(d.path + "/real");
  d.write("real/f", "secret\n");
  ::symlink((d.path + "/real/f").c_str(), (d.path + "/link").c_str());
  ::symlink((d.path + "/real").c_str(), (d.path + "/dirlink").c_str());
  auto last = read_untrusted_file(d.path + "/link", 100);
  REQUIRE_FALSE(last);
  CHECK(last.error().err() == ELOOP);
  auto on_way = read_untrusted_file(d.path + "/dirlink/f", 100);
  REQUIRE_FALSE(on_way);
  CHECK(on_way.error().message().find("symlink") != std::string::npos);
  CHECK(on_way.error().err() == ELOOP);
  auto climbs = read_untrusted_file(d.path + "/real/../real/f", 100);
  REQUIRE_FALSE(climbs);
  CHECK(climbs.error().err() == EPERM);
  CHECK_FALSE(read_untrusted_file(d.path + "/real/..", 100));
  auto top = read_untrusted_file("/pj-no-such-file-at-the-root", 100);
  REQUIRE(top);
  CHECK_FALSE(top->has_value());
}

TEST_CASE("read_untrusted_file does not wait on a FIFO and refuses it") {
  TempDir d;
  REQUIRE(::mkfifo((d.path + "/fifo").c_str(), 0600) == 0);
  auto r = read_untrusted_file(d.path + "/fifo", 100);
  REQUIRE_FALSE(r);
  CHECK(r.error().message().find("FIFO") != std::string::npos);
}

TEST_CASE("read_untrusted_file refuses a sparse file past its cap without reading it") {
  TempDir d;
  int fd = ::open((d.path + "/sparse").c_str(), O_CREAT | O_WRONLY, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 300L << 20) == 0);
  ::close(fd);
  auto r = read_untrusted_file(d.path + "/sparse", 4096);
  REQUIRE_FALSE(r);
  CHECK(r.error().message().find("more than the 4096") != std::string::npos);
  d.write("exact", std::string(4096, 'x'));
  auto exact = read_untrusted_file(d.path + "/exact", 4096);
  REQUIRE(exact);
  CHECK((*exact)->size() == 4096);
}

TEST_CASE("stat_beneath tells a symlink, a directory, a file and absence apart without following") {
  TempDir d;
  std::filesystem::create_directories(d.path + "/dir");
  d.write("dir/f", "x");
  ::symlink("/etc", (d.path + "/link").c_str());
  auto root = open_dir_nofollow(d.path);
  REQUIRE(root);
  CHECK(stat_beneath(root->get(), "dir")->type == NodeType::directory);
  CHECK(stat_beneath(root->get(), "dir/f")->type == NodeType::regular);
  CHECK(stat_beneath(root->get(), "link")->type == NodeType::symlink);
  CHECK(stat_beneath(root->get(), "nope")->type == NodeType::absent);
  CHECK_FALSE(stat_beneath(root->get(), "link/passwd"));  // never through the link
  CHECK_FALSE(open_dir_beneath(root->get(), "dir/.."));
}

TEST_CASE(
    "open_output_file: a regular file or none; a FIFO, device, directory or symlink never blocks and is refused") {
  TempDir t;
  t.write("doc", "old content\n");
  t.write("log", "line 1\n");
  t.write("target", "precious\n");
  REQUIRE(::mkfifo((t.path + "/fifo").c_str(), 0600) == 0);
  REQUIRE(::mkfifo((t.path + "/read-fifo").c_str(), 0600) == 0);
  REQUIRE(::symlink((t.path + "/target").c_str(), (t.path + "/link").c_str()) == 0);
  REQUIRE(::symlink((t.path + "/made-through-link").c_str(), (t.path + "/dangling").c_str()) == 0);
  std::filesystem::create_directory(t.path + "/dir");
  // A FIFO with a reader would accept a non-blocking open: still refused.
  int reader = ::open((t.path + "/read-fifo").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(reader >= 0);

  auto doc = open_output_file(t.path + "/doc", OutputMode::replace_content, 0644);
  REQUIRE(doc);
  CHECK((::fcntl(doc->get(), F_GETFL) & O_NONBLOCK) == 0);
  CHECK((::fcntl(doc->get(), F_GETFD) & FD_CLOEXEC) != 0);
  CHECK(std::filesystem::file_size(t.path + "/doc") == 0);
  auto log = open_output_file(t.path + "/log", OutputMode::append, 0600);
  REQUIRE(log);
  CHECK(::write(log->get(), "line 2\n", 7) == 7);
  std::ifstream in(t.path + "/log");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(all == "line 1\nline 2\n");
  auto fresh = open_output_file(t.path + "/new", OutputMode::append, 0600);
  REQUIRE(fresh);
  CHECK(std::filesystem::is_regular_file(t.path + "/new"));

  struct Case {
    std::string path, says;
  } refused[] = {
      {t.path + "/fifo", "is a FIFO"},     {t.path + "/read-fifo", "is a FIFO"}, {"/dev/null", "is a device"},
      {t.path + "/dir", "is a directory"}, {t.path + "/link", "is a symlink"},   {t.path + "/dangling", "is a symlink"},
  };
  for (const auto& c : refused) {
    CAPTURE(c.path);
    for (auto mode : {OutputMode::replace_content, OutputMode::append}) {
      auto r = open_output_file(c.path, mode, 0600);
      REQUIRE_FALSE(r);
      CHECK(r.error().message().find(c.path + " " + c.says) != std::string::npos);
    }
  }
  ::close(reader);
  std::ifstream target(t.path + "/target");
  std::string kept((std::istreambuf_iterator<char>(target)), std::istreambuf_iterator<char>());
  CHECK(kept == "precious\n");
  CHECK_FALSE(std::filesystem::exists(t.path + "/made-through-link"));
}

TEST_CASE("directory_is_empty: only . and .. count as empty, however many entries and wherever the offset is") {
  TempDir d;
  std::filesystem::create_directories(d.path + "/empty");
  std::filesystem::create_directories(d.path + "/full");
  // More entries than one 4 KiB getdents64 buffer holds, names sorting anywhere.
  for (int i = 0; i < 400; ++i) d.write("full/entry-with-a-long-name-" + std::to_string(i), "");
  std::filesystem::create_directories(d.path + "/one");
  d.write("one/.hidden", "");
  auto open_dir = [&](const std::string& rel) {
    return UniqueFd(::open((d.path + "/" + rel).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  };
  UniqueFd empty = open_dir("empty"), full = open_dir("full"), one = open_dir("one");
  CHECK(directory_is_empty(empty.get()));
  CHECK(directory_is_empty(empty.get()));  // again: read from the start each time
  CHECK_FALSE(directory_is_empty(full.get()));
  CHECK_FALSE(directory_is_empty(one.get()));
  CHECK_FALSE(directory_is_empty(one.get()));
  UniqueFd file(::open((d.path + "/one/.hidden").c_str(), O_RDONLY | O_CLOEXEC));
  CHECK_FALSE(directory_is_empty(file.get()));  // not a directory
  CHECK_FALSE(directory_is_empty(-1));
}

TEST_CASE(
    "open_dir_beneath/open_dir_nofollow: no symlink on the way or at the end, no \"..\", each refusal its errno") {
  TrickyTree t;
  auto top = open_dir_nofollow(t.d.path);
  REQUIRE(top);
  struct stat c;
  REQUIRE(::stat((t.d.path + "/a/b/c").c_str(), &c) == 0);
  auto err_of = [&](const std::string& rel) {
    auto r = open_dir_beneath(top->get(), rel);
    return r ? 0 : r.error().err();
  };
  CHECK(outcome("", open_dir_beneath(top->get(), "./a//b/c/")) == outcome("", open_dir_nofollow(t.d.path + "/a/b/c")));
  CHECK(outcome("", open_dir_beneath(top->get(), "a/b/c")) == ": " + std::to_string(c.st_ino) + " dir");
  for (const char* rel : {"a/rel", "a/rel/c", "a/abs", "a/abs/c", "a/up", "a/up/a", "a/magic", "a/dangling"}) {
    CAPTURE(rel);
    CHECK(err_of(rel) == ELOOP);
    auto abs = open_dir_nofollow(t.d.path + "/" + rel);
    REQUIRE_FALSE(abs);
    CHECK(abs.error().err() == ELOOP);
  }
  CHECK(err_of("a/file") == ENOTDIR);
  CHECK(err_of("a/file/x") == ENOTDIR);
  CHECK(err_of("a/fifo") == ENOTDIR);
  CHECK(err_of("a/missing/c") == ENOENT);
  CHECK(err_of("missing/../a") == ENOENT);  // the walk's order: the missing one comes first
  CHECK(err_of("a/b/..") == EPERM);
  CHECK(err_of("a/../a") == EPERM);
  CHECK(err_of("..") == EPERM);
  auto message = open_dir_beneath(top->get(), "a/rel/c");
  REQUIRE_FALSE(message);
  CHECK(message.error().message().find("open rel in a/rel/c") != std::string::npos);  // names the symlink
}

#ifdef __linux__
TEST_CASE("open_dir_beneath/open_dir_nofollow: where openat2 is missing or refused, the walk gives the same answers") {
  TrickyTree t;
  const auto with_openat2 = t.outcomes();
  REQUIRE(with_openat2.size() == 2 * TrickyTree::rels.size());
  for (int err : {ENOSYS, EPERM, EACCES, E2BIG}) {
    CAPTURE(errno_name(err));
    auto walked = in_child_refusing(SYS_openat2, err, [&] { return t.outcomes(); });
    REQUIRE(walked.size() == with_openat2.size());
    for (size_t i = 0; i < walked.size(); ++i) CHECK(walked[i] == with_openat2[i]);
  }
}

TEST_CASE("open_dir_nofollow and open_dir_beneath open a deep directory in one openat2 call, no openat per component") {
  if (!have_openat2()) {
    MESSAGE("openat2 is not available here: the walk is what runs");
    return;
  }
  TempDir d;
  std::filesystem::create_directories(d.path + "/a/b/c/d/e");
  auto top = open_dir_nofollow(d.path);
  REQUIRE(top);
  // openat(2) refused: only openat2 can open these.
  auto lines = in_child_refusing(SYS_openat, EACCES, [&] {
    return std::vector<std::string>{outcome("absolute", open_dir_nofollow(d.path + "/a/b/c/d/e")),
                                    outcome("beneath", open_dir_beneath(top->get(), "a/b/c/d/e"))};
  });
  struct stat e;
  REQUIRE(::stat((d.path + "/a/b/c/d/e").c_str(), &e) == 0);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "absolute: " + std::to_string(e.st_ino) + " dir");
  CHECK(lines[1] == "beneath: " + std::to_string(e.st_ino) + " dir");
}
#endif

TEST_CASE("make_private_dir makes what is missing 0700, keeps what exists, and makes nothing through a symlink") {
  TempDir d;
  const mode_t old_mask = ::umask(022);
  std::filesystem::create_directories(d.path + "/kept");
  ::chmod((d.path + "/kept").c_str(), 0755);
  auto made = make_private_dir(d.path + "/kept/x/y");
  REQUIRE(made);
  struct stat st;
  for (const char* rel : {"/kept/x", "/kept/x/y"}) {
    CAPTURE(rel);
    REQUIRE(::lstat((d.path + rel).c_str(), &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK((st.st_mode & 07777) == 0700);
  }
  REQUIRE(::lstat((d.path + "/kept").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);
  auto again = make_private_dir(d.path + "/kept/x/y");
  CHECK(outcome("", again) == outcome("", made));

  // A symlink on the way: refused with ELOOP before anything is made at
  // its target.
  std::filesystem::create_directories(d.path + "/real");
  REQUIRE(::symlink((d.path + "/real").c_str(), (d.path + "/link").c_str()) == 0);
  auto through = make_private_dir(d.path + "/link/new/sub");
  REQUIRE_FALSE(through);
  CHECK(through.error().err() == ELOOP);
  CHECK_FALSE(std::filesystem::exists(d.path + "/real/new"));
  REQUIRE(::symlink((d.path + "/real").c_str(), (d.path + "/kept/x/y/last").c_str()) == 0);
  auto last = make_private_dir(d.path + "/kept/x/y/last");
  REQUIRE_FALSE(last);
  CHECK(last.error().err() == ELOOP);
  d.write("file", "x");
  auto file = make_private_dir(d.path + "/file/sub");
  REQUIRE_FALSE(file);
  CHECK(file.error().err() == ENOTDIR);
  ::umask(old_mask);
}

TEST_CASE("for_each_name lists every name but . and .., from the start each time, and stops when asked") {
  TempDir d;
  std::set<std::string> made;
  // Enough long names to take several reads of the directory.
  for (int i = 0; i < 1500; ++i) {
    std::string name = "entry-" + std::to_string(i) + "-" + std::string(40, 'x');
    if (i % 3 == 0)
      std::filesystem::create_directory(d.path + "/" + name);
    else
      d.write(name, "");
    made.insert(name);
  }
  REQUIRE(::symlink("nowhere", (d.path + "/link").c_str()) == 0);
  made.insert("link");
  auto dir = open_dir_nofollow(d.path);
  REQUIRE(dir);
  for (int round = 0; round < 2; ++round) {  // the second starts over
    std::vector<std::string> seen;
    CHECK(for_each_name(dir->get(), [&](std::string_view n) {
      seen.emplace_back(n);
      return true;
    }));
    CHECK(seen.size() == made.size());
    CHECK(std::set<std::string>(seen.begin(), seen.end()) == made);
  }
  size_t calls = 0;
  CHECK(for_each_name(dir->get(), [&](std::string_view) { return ++calls < 10; }));
  CHECK(calls == 10);
  auto empty = open_dir_nofollow(d.path + "/entry-0-" + std::string(40, 'x'));
  REQUIRE(empty);
  CHECK(for_each_name(empty->get(), [](std::string_view) { return true; }));
  UniqueFd file(::open((d.path + "/entry-1-" + std::string(40, 'x')).c_str(), O_RDONLY | O_CLOEXEC));
  CHECK_FALSE(for_each_name(file.get(), [](std::string_view) { return true; }));
}

TEST_CASE("for_each_entry gives each entry's type as its directory records it") {
  TempDir d;
  d.write("file", "x");
  REQUIRE(std::filesystem::create_directory(d.path + "/dir"));
  std::filesystem::create_symlink("/etc/passwd", d.path + "/link");
  REQUIRE(::mkfifo((d.path + "/fifo").c_str(), 0600) == 0);
  auto dir = open_dir_nofollow(d.path);
  REQUIRE(dir);
  std::set<std::string> seen;
  CHECK(for_each_entry(dir->get(), [&](std::string_view n, unsigned char type) {
    seen.insert(std::string(n) + ":" + std::to_string(type));
    return true;
  }));
  // /tmp's filesystem records types (tmpfs, ext4, xfs, btrfs all do).
  CHECK(seen == std::set<std::string>{"file:" + std::to_string(DT_REG), "dir:" + std::to_string(DT_DIR),
                                      "link:" + std::to_string(DT_LNK), "fifo:" + std::to_string(DT_FIFO)});
}

#ifdef __linux__
TEST_CASE("remove_special_files (the sessions scrub) judges by the type each directory records: no lstat per file") {
  TempDir d;
  REQUIRE(std::filesystem::create_directories(d.path + "/x/deeper"));
  d.write("a.jsonl", "{}\n");
  d.write("x/b.jsonl", "{}\n");
  d.write("x/deeper/c.jsonl", "{}\n");
  std::filesystem::create_symlink("/etc/passwd", d.path + "/x/planted.jsonl");
  std::filesystem::create_symlink("deeper", d.path + "/x/dirlink");
  REQUIRE(::mkfifo((d.path + "/fifo").c_str(), 0600) == 0);
  REQUIRE(::mkfifo((d.path + "/x/deeper/fifo").c_str(), 0600) == 0);
  // With lstat refused, the scrub still judges every entry: it needs none
  // where the filesystem records types (/tmp's here; before: it skipped
  // every entry).
  auto lines = in_child_refusing(SYS_newfstatat, EPERM, [&] {
    auto r = remove_special_files(d.path);
    return std::vector<std::string>{std::to_string(r.removed) + " removed, " + std::to_string(r.unchecked) +
                                    " unchecked"};
  });
  CHECK(lines == std::vector<std::string>{"4 removed, 0 unchecked"});
  for (const char* kept : {"a.jsonl", "x/b.jsonl", "x/deeper/c.jsonl"})
    CHECK(std::filesystem::is_regular_file(d.path + "/" + kept));
  for (const char* gone : {"x/planted.jsonl", "x/dirlink", "fifo", "x/deeper/fifo"})
    CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(d.path + "/" + gone)));
  CHECK(std::filesystem::is_regular_file("/etc/passwd"));  // never followed
  // And as before where lstat is allowed.
  std::filesystem::create_symlink("/etc/passwd", d.path + "/again");
  auto again = remove_special_files(d.path);
  CHECK(again.removed == 1);
  CHECK(again.unchecked == 0);
}

TEST_CASE("remove_special_files gives the owner back the rights the jail took from its directories") {
  // The jail owns the directories it makes among the sessions: chmod 0555
  // kept a planted link from being unlinked, chmod 0111 kept a subtree
  // from being read. Run without capabilities, so that root is held to
  // the modes too.
  TempDir d;
  REQUIRE(std::filesystem::create_directories(d.path + "/ro"));
  REQUIRE(std::filesystem::create_directories(d.path + "/blind/inner"));
  std::filesystem::create_symlink("/etc/passwd", d.path + "/ro/planted.jsonl");
  std::filesystem::create_symlink("/etc/passwd", d.path + "/blind/inner/planted.jsonl");
  REQUIRE(::chmod((d.path + "/ro").c_str(), 0555) == 0);
  REQUIRE(::chmod((d.path + "/blind").c_str(), 0111) == 0);
  auto lines = in_child_refusing(-1, 0, [&] {
    // Every capability set emptied (capset(2) itself: the macOS-like
    // build links no libcap).
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[2] = {};
    const bool dropped = ::syscall(SYS_capset, &header, none) == 0;
    auto r = remove_special_files(d.path);
    return std::vector<std::string>{
        dropped ? "capabilities dropped" : "cap_set_proc failed",
        std::to_string(r.removed) + " removed, " + std::to_string(r.unchecked) + " unchecked"};
  });
  CHECK(lines == std::vector<std::string>{"capabilities dropped", "2 removed, 0 unchecked"});
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(d.path + "/ro/planted.jsonl")));
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(d.path + "/blind/inner/planted.jsonl")));
  struct stat st;
  REQUIRE(::stat((d.path + "/ro").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);  // the owner's rwx back, the rest as it was
}

TEST_CASE("remove_special_files counts what lies beyond its bounds as unchecked") {
  TempDir d;
  std::string deep = d.path;
  for (int i = 0; i < 130; ++i) deep += "/d";
  REQUIRE(std::filesystem::create_directories(deep));
  std::filesystem::create_symlink("/etc/passwd", deep + "/planted.jsonl");
  auto r = remove_special_files(d.path);
  CHECK(r.removed == 0);
  CHECK(r.unchecked >= 1);  // said, not passed over
  CHECK(std::filesystem::is_symlink(deep + "/planted.jsonl"));
}
#endif
