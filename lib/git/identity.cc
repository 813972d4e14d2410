#include "git/identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "util/log.h"
#include "util/temp_file.h"
#include "util/untrusted.h"

namespace pj::git::identity {

using util::Error;

namespace {

// section, name ("*": every name), whether a subsection is allowed.
struct Allowed {
  std::string_view section, name;
  bool subsection;
};

// Settings that name who commits and how output looks: none of them runs
// anything on the host, carries a secret or switches transports. (The
// editor and pager run inside the jail, as the jail's own processes.)
constexpr Allowed kAllowed[] = {
    {"user", "name", false},
    {"user", "email", false},
    {"author", "name", false},
    {"author", "email", false},
    {"committer", "name", false},
    {"committer", "email", false},
    {"init", "defaultbranch", false},
    {"core", "editor", false},
    {"core", "pager", false},
    {"core", "autocrlf", false},
    {"core", "eol", false},
    {"core", "quotepath", false},
    {"core", "whitespace", false},
    {"core", "abbrev", false},
    {"color", "*", true},
    {"advice", "*", false},
    {"pull", "rebase", false},
    {"pull", "ff", false},
    {"push", "default", false},
    {"push", "autosetupremote", false},
    {"merge", "conflictstyle", false},
    {"merge", "ff", false},
    {"rebase", "autosquash", false},
    {"rebase", "autostash", false},
    {"rebase", "updaterefs", false},
    {"diff", "algorithm", false},
    {"diff", "colormoved", false},
    {"diff", "renames", false},
    {"fetch", "prune", false},
    {"rerere", "enabled", false},
    {"commit", "verbose", false},
    {"log", "date", false},
    {"branch", "sort", false},
    {"tag", "sort", false},
    {"column", "ui", false},
    {"help", "autocorrect", false},
    {"status", "short", false},
    {"status", "branch", false},
};

// git-config(1): inside double quotes, \" \\ \n \t are the escapes.
std::string quoted(std::string_view v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\0' || c == '\r')
      continue;  // not representable; never meaningful here
    else
      out += c;
  }
  return out + "\"";
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

constexpr size_t kMaxConfig = 1 << 20;

// The user's own file (a symlink into a dotfiles repository is fine: the
// jail cannot write the real home): its text, or nullopt when absent.
std::optional<std::string> read_host_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  if (!S_ISREG(st.st_mode) || st.st_size > static_cast<off_t>(kMaxConfig)) {
    util::warn("git identity: {} is not a regular file under 1 MiB; the jail gets none of it", path);
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

bool allowed(const git::config::Entry& e) {
  for (const auto& a : kAllowed)
    if (e.section == a.section && (a.name == "*" || e.name == a.name) && (a.subsection || !e.subsection)) return true;
  return false;
}

std::string synthesize(const std::vector<std::pair<std::string, std::string>>& files,
                       std::vector<std::string>& left_out) {
  // section header -> lines, in first-seen order.
  std::vector<std::pair<std::string, std::vector<std::string>>> sections;
  auto lines_of = [&](const std::string& header) -> std::vector<std::string>& {
    for (auto& [h, l] : sections)
      if (h == header) return l;
    sections.emplace_back(header, std::vector<std::string>{});
    return sections.back().second;
  };
  for (const auto& [name, text] : files) {
    auto parsed = git::config::parse(text);
    if (parsed.error_line != 0) {
      left_out.push_back(
          fmt::format("{}:{}: {} (git refuses the file; none of it is passed)", name, parsed.error_line, parsed.error));
      continue;
    }
    for (const auto& e : parsed.entries) {
      if (!allowed(e)) {
        left_out.push_back(git::config::escape(e.key()));
        continue;
      }
      std::string header =
          e.subsection ? fmt::format("[{} {}]", e.section, quoted(*e.subsection)) : fmt::format("[{}]", e.section);
      // A bare name is git's boolean true.
      lines_of(header).push_back(fmt::format("\t{} = {}", e.name, quoted(e.value.value_or("true"))));
    }
  }
  std::string out =
      "# Written by pi-jail from your git config: only the allowlisted settings\n"
      "# (identity, display); never credentials, url rewrites, includes or commands.\n"
      "# Read-only. `git config --global` writes ~/.gitconfig (this workspace's jail\n"
      "# home), which git reads after this file.\n";
  for (const auto& [h, l] : sections) {
    out += h + "\n";
    for (const auto& line : l) out += line + "\n";
  }
  out +=
      "[core]\n"
      // git appends ssh's arguments, [user@]host second to last: named in
      // the fix (the jail's own text, shown to the jail only).
      "\tsshCommand = \"f() { h=; p=; for a; do h=$p; p=$a; done; h=${h#*@}; echo \\\"pi-jail: ssh cannot connect from "
      "inside "
      "the jail to $h: no SSH host is allowed (no DNS; the network filter passes HTTP(S) and SOCKS5 only). Allow it: "
      "pi-jail --allow-ssh $h (its key taken from your known_hosts); or use an https:// remote (git remote set-url "
      "origin https://...) with its host allowed (pi-jail --allow-net-preset github)\\\" >&2; exit 255; }; f\"\n";
  return out;
}

util::Result<std::string> prepare(const std::string& state_dir, const std::string& home) {
  std::vector<std::pair<std::string, std::string>> files;
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const std::string xdg_file = (xdg && *xdg == '/' ? std::string(xdg) : home + "/.config") + "/git/config";
  // git's order: the XDG file, then ~/.gitconfig (which wins).
  for (const std::string& path : {xdg_file, home + "/.gitconfig"})
    if (auto text = read_host_file(path)) files.emplace_back(path, std::move(*text));
  std::vector<std::string> left_out;
  const std::string text = synthesize(files, left_out);
  if (!left_out.empty()) util::debug("git identity: not passed to the jail: {}", fmt::join(left_out, ", "));

  return detail::publish(state_dir + "/gitconfig", text);
}

namespace detail {

util::Result<std::string> publish(const std::string& dir_path, const std::string& text,
                                  const std::function<void()>& after_check) {
  auto dir = util::make_private_dir(dir_path);
  if (!dir) return std::move(dir.take_error()).context("the jail's git config");
  const std::string name = fmt::format("{:016x}", fnv1a(text));
  const std::string path = dir_path + "/" + name;
  // Named by its content, and never replaced while it holds it: a
  // concurrent run's jail may have it bound already (replacing it made that
  // run fail with ESTALE). A file there is used only if it holds the bytes.
  auto holds_text = [&] {
    auto existing = util::read_untrusted_file(dir->get(), name, kMaxConfig * 2, path);
    return existing && *existing && **existing == text;
  };
  if (holds_text()) return path;
  if (after_check) after_check();
  // Published without replacing anything: a concurrent run may have
  // published the same bytes since the look above, and planned its bind.
  // A name of its own: a leftover of a run killed mid-write, whose pid a
  // later run may have (a fresh container counts from 1 again), must not
  // stop that run.
  auto tmp = util::TempFile::create(dir->get(), name);
  if (!tmp) return std::move(tmp.take_error()).context(fmt::format("write {}", path));
  if (auto st = tmp->fill(text, util::Durability::page_cache); !st)
    return std::move(st.take_error()).context(fmt::format("write {}", path));
  auto placed = tmp->publish(name);
  if (!placed) return std::move(placed.take_error()).context(fmt::format("write {}", path));
  // A concurrent run published the same content first: use its file.
  if (*placed || holds_text()) return path;
  // Something else under our content's name (no run binds it for this
  // content): replaced by ours in one step.
  if (auto st = tmp->rename_over(name); !st) return std::move(st.take_error()).context(fmt::format("write {}", path));
  return path;
}

}  // namespace detail

}  // namespace pj::git::identity
