// The filesystem view: what the jail can see and change.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "harness.h"

using namespace pj::test;

TEST_CASE("a file written in the workspace appears on the host") {
  Sandbox sb;
  auto o = sb.probe({"write", sb.ws + "/made-inside"});
  CHECK(trim(o.out) == "ok");
  CHECK(o.status == 0);
  CHECK(read_file(sb.ws + "/made-inside") == "probe\n");
}

TEST_CASE("writes outside the workspace fail") {
  Sandbox sb;
  // $HOME/x is written in the jail home, not here (home_test.cc).
  for (const std::string& path :
       {sb.home + "/.ssh/authorized_keys", std::string("/etc/x"), std::string("/usr/x"), std::string("/x"),
        sb.outside + "/x", std::string("/proc/sys/kernel/hostname"), std::string("/dev/x")}) {
    CAPTURE(path);
    auto o = sb.probe({"write", path});
    CHECK(o.status == 1);
    CHECK(trim(o.out) != "ok");
  }
  CHECK_FALSE(exists(sb.outside + "/x"));
  CHECK_FALSE(exists(sb.home + "/x"));
}

TEST_CASE("a write next to the workspace under /tmp lands in the jail's scratch /tmp, not on the host") {
  Sandbox sb;  // base is /tmp/pj-test.XXXXXX, so base/x is under the jail's private /tmp
  auto o = sb.probe({"write", sb.base + "/x"});
  CHECK(trim(o.out) == "ok");
  CHECK_FALSE(exists(sb.base + "/x"));
}

TEST_CASE("/tmp is private both ways") {
  Sandbox sb;
  std::string canary = "/tmp/pj-host-canary-" + unique_token();
  write_file(canary, "host\n");
  auto seen = sb.probe({"read", canary});
  CHECK(trim(seen.out) == "ENOENT");
  ::unlink(canary.c_str());

  std::string inside = "/tmp/pj-jail-file-" + unique_token();
  auto w = sb.probe({"write", inside});
  CHECK(trim(w.out) == "ok");
  CHECK_FALSE(exists(inside));
}

namespace {

struct ScratchPlace {
  std::string fsid;
  unsigned long long bytes = 0;
  std::string mode;
};

// The probe's "statfs" lines: "PATH fsid=H:L blocks=N bsize=N mode=OOOO".
std::map<std::string, ScratchPlace> scratch_places(const std::string& out) {
  std::map<std::string, ScratchPlace> places;
  std::istringstream in(out);
  std::string path, fsid, blocks, bsize, mode;
  while (in >> path >> fsid >> blocks >> bsize >> mode) {
    if (!fsid.starts_with("fsid=") || !blocks.starts_with("blocks=") || !bsize.starts_with("bsize=")) continue;
    places[path] = {fsid.substr(5), std::stoull(blocks.substr(7)) * std::stoull(bsize.substr(6)), mode.substr(5)};
  }
  return places;
}

}  // namespace

TEST_CASE("/tmp, /var/tmp and /dev/shm are one tmpfs of at most half the RAM, each place mode 1777") {
  Sandbox sb;
  auto o = sb.probe({"statfs", "/tmp", "/var/tmp", "/dev/shm"});
  CAPTURE(o.out);
  CAPTURE(o.err);
  auto places = scratch_places(o.out);
  REQUIRE(places.size() == 3);
  const unsigned long long half_ram = static_cast<unsigned long long>(::sysconf(_SC_PHYS_PAGES)) *
                                      static_cast<unsigned long long>(::sysconf(_SC_PAGESIZE)) / 2;
  for (const auto& entry : places) {
    const auto& [path, p] = entry;
    CAPTURE(entry.first);
    CHECK(p.fsid == places["/tmp"].fsid);
    CHECK(p.mode == "1777");
    CHECK(p.bytes > 0);
    CHECK(p.bytes <= half_ram + 4096);
  }
}

TEST_CASE("[limits] scratch is one budget: 6 MiB fits in each place alone, not in two of an 8 MiB budget") {
  Sandbox sb;
  std::string config = sb.base + "/operator.toml";
  write_file(config, "[limits]\nscratch = \"8M\"\n");
  const std::vector<std::string> cfg{"--config", config};
  const std::string six_mib = std::to_string(6 << 20);

  auto st = sb.probe({"statfs", "/tmp", "/var/tmp", "/dev/shm"}, cfg);
  CAPTURE(st.out);
  CAPTURE(st.err);
  auto places = scratch_places(st.out);
  REQUIRE(places.size() == 3);
  for (const auto& entry : places) {
    const auto& [path, p] = entry;
    CAPTURE(entry.first);
    CHECK(p.fsid == places["/tmp"].fsid);
    CHECK(p.bytes == 8u << 20);
    CHECK(p.mode == "1777");
  }

  for (const char* place : {"/tmp", "/var/tmp", "/dev/shm"}) {
    CAPTURE(place);
    auto alone = sb.probe({"fill", std::string(place) + "/big", six_mib}, cfg);
    CAPTURE(alone.err);
    CHECK(alone.out == "ok\n");
  }
  for (const auto& pair :
       {std::pair{"/tmp", "/dev/shm"}, std::pair{"/tmp", "/var/tmp"}, std::pair{"/var/tmp", "/dev/shm"}}) {
    const auto& [first, second] = pair;
    CAPTURE(pair.first);
    CAPTURE(pair.second);
    auto both = sb.probe({"fill", std::string(first) + "/big", six_mib, std::string(second) + "/big", six_mib}, cfg);
    CAPTURE(both.err);
    CHECK(both.out == "ok\nENOSPC\n");
    CHECK(both.status == 1);
  }
}

TEST_CASE("secrets in $HOME, /root and /etc/shadow cannot be read") {
  Sandbox sb;
  for (const std::string& path : {sb.home + "/.ssh/id_ed25519", sb.home + "/.aws/credentials", sb.outside + "/secret",
                                  std::string("/etc/shadow"), std::string("/etc/gshadow")}) {
    CAPTURE(path);
    auto o = sb.probe({"read", path});
    CHECK(o.status == 1);
    CHECK(trim(o.out) == "ENOENT");
  }
  if (::getuid() == 0) {
    std::string canary = "/root/pj-canary-" + unique_token();
    write_file(canary, "CANARY-ROOT\n");
    auto o = sb.probe({"read", canary});
    ::unlink(canary.c_str());
    CHECK(trim(o.out) == "ENOENT");
  }
}

TEST_CASE("a workspace symlink to a secret leads nowhere") {
  Sandbox sb;
  ::symlink((sb.home + "/.ssh/id_ed25519").c_str(), (sb.ws + "/key").c_str());
  ::symlink("/etc/shadow", (sb.ws + "/shadow").c_str());
  CHECK(trim(sb.probe({"read", sb.ws + "/key"}).out) == "ENOENT");
  CHECK(trim(sb.probe({"read", sb.ws + "/shadow"}).out) == "ENOENT");
}

TEST_CASE("--deny masks a path inside the workspace with an empty read-only file") {
  Sandbox sb;
  write_file(sb.ws + "/.env", "TOKEN=secret\n");
  auto r = sb.probe({"read", sb.ws + "/.env"}, {"--deny", sb.ws + "/.env"});
  CHECK(trim(r.out) == "ok 0");
  auto w = sb.probe({"write", sb.ws + "/.env"}, {"--deny", sb.ws + "/.env"});
  CHECK(trim(w.out) == "EROFS");
  CHECK(read_file(sb.ws + "/.env") == "TOKEN=secret\n");
}

TEST_CASE("directory masks: empty and read-only each, one superblock for all of them") {
  Sandbox sb;
  std::filesystem::create_directories(sb.ws + "/secrets");
  write_file(sb.ws + "/secrets/key", "k\n");
  // .envrc and .vscode: placeholders (absent); secrets: a --deny over a
  // directory with something in it.
  auto o = sb.jail({"/bin/sh", "-c",
                    "cd " + sb.ws +
                        "; for d in .envrc .vscode secrets; do ls -A $d | wc -l; "
                        "mkdir $d/new 2>/dev/null && echo wrote-$d; (: > $d/f) 2>/dev/null && echo wrote-$d; done; "
                        "stat -c %d .envrc .vscode secrets | sort -u | wc -l"},
                   {"--deny", sb.ws + "/secrets"});
  CAPTURE(o.err);
  REQUIRE(o.status == 0);
  CHECK(o.out == "0\n0\n0\n1\n");
  CHECK(read_file(sb.ws + "/secrets/key") == "k\n");
}

TEST_CASE("--allow-read shows a path read-only; --allow-write read-write") {
  Sandbox sb;
  auto r = sb.probe({"read", sb.outside + "/secret"}, {"--allow-read", sb.outside});
  CHECK(trim(r.out) == "ok 15");
  auto w = sb.probe({"write", sb.outside + "/secret"}, {"--allow-read", sb.outside});
  CHECK(trim(w.out) == "EROFS");
  auto w2 = sb.probe({"write", sb.outside + "/new"}, {"--allow-write", sb.outside});
  CHECK(trim(w2.out) == "ok");
  CHECK(exists(sb.outside + "/new"));
}

TEST_CASE("the command starts in the caller's directory inside the workspace") {
  Sandbox sb;
  std::filesystem::create_directories(sb.ws + "/sub/dir");
  auto o = sb.jail({probe(), "cwd"}, {}, sb.ws + "/sub/dir");
  CHECK(trim(o.out) == sb.ws + "/sub/dir");
}

TEST_CASE("/dev holds only the minimal devices") {
  Sandbox sb;
  auto o = sb.probe({"ls", "/dev"});
  CHECK(o.out.find("null") != std::string::npos);
  CHECK(o.out.find("ptmx") != std::string::npos);
  CHECK(o.out.find("pts") != std::string::npos);
  for (const char* absent : {"sda", "vda", "mem", "kmsg", "loop0", "fuse", "net", "kvm"}) {
    CAPTURE(absent);
    CHECK(o.out.find(std::string(absent) + "\n") == std::string::npos);
  }
  CHECK(trim(sb.probe({"write", "/dev/null"}).out) == "ok");
  CHECK(trim(sb.probe({"read", "/sys/kernel/notes"}).out) == "ENOENT");
}

TEST_CASE("in a git worktree, commits work and the main repository's hooks and config stay read-only") {
  Sandbox sb;
  std::string main_repo = sb.outside + "/main";
  std::string wt = sb.ws + "/wt";
  auto git = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/git", "-c", "user.name=t", "-c", "user.email=t@e"});
    return run(args, {"HOME=" + sb.home});
  };
  REQUIRE(git({"init", "-q", main_repo}).status == 0);
  REQUIRE(git({"-C", main_repo, "commit", "-q", "--allow-empty", "-m", "first"}).status == 0);
  REQUIRE(git({"-C", main_repo, "worktree", "add", "-q", wt}).status == 0);
  auto o = run({"/usr/bin/env", "-C", wt, pi_jail(), "-q", "-w", wt, "--", "/bin/sh", "-c",
                "echo x > f && git add f && git -c user.name=t -c user.email=t@e commit -qm jailed && echo committed; "
                "echo evil > " +
                    main_repo +
                    "/.git/hooks/pre-commit; echo hooks=$?; "
                    "git config core.fsmonitor 'touch pwned'; echo config=$?"},
               {"HOME=" + sb.home});
  CAPTURE(o.err);
  CHECK(o.out.find("committed") != std::string::npos);
  CHECK(o.out.find("hooks=0") == std::string::npos);
  CHECK(o.out.find("config=0") == std::string::npos);
  CHECK(git({"-C", wt, "log", "--oneline"}).out.find("jailed") != std::string::npos);
  CHECK_FALSE(exists(main_repo + "/.git/hooks/pre-commit"));
  CHECK(read_file(main_repo + "/.git/config").find("fsmonitor") == std::string::npos);
}

TEST_CASE("the parents of read-only paths cannot be renamed or removed to rebuild them writable") {
  // `mv .git .git2; mkdir -p .git/hooks` would hand the host a hooks
  // directory the jail wrote; the kernel must refuse the rename (EBUSY).
  Sandbox sb;
  REQUIRE(run({"/usr/bin/git", "init", "-q", sb.ws}).status == 0);
  auto o = sb.jail({"/bin/sh", "-c",
                    "mv .git .git2; echo mv=$?; rmdir .git 2>/dev/null; echo rmdir=$?; "
                    "mkdir -p .git/hooks2 && echo inside=$?; mkdir -p .pi2 && mv .pi2 .pi; echo pi=$?"});
  CAPTURE(o.err);
  CHECK(o.out.find("mv=1") != std::string::npos);
  CHECK(o.out.find("rmdir=1") != std::string::npos);
  CHECK(o.out.find("inside=0") != std::string::npos);  // the rest of .git stays writable
  CHECK(o.out.find("pi=0") == std::string::npos);
  CHECK(o.err.find("Device or resource busy") != std::string::npos);
  CHECK_FALSE(exists(sb.ws + "/.git2"));
  CHECK(exists(sb.ws + "/.git/HEAD"));
}
