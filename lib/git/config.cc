#include "git/config.h"

#include <fmt/format.h>

namespace pj::git::config {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_key_char(char c) { return is_alpha(c) || (c >= '0' && c <= '9') || c == '-'; }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lowered(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = lower(c);
  return out;
}

// Characters as git's config reader sees them (config.c get_next_char):
// "\r\n" is one '\n', and the end of the text is a final '\n'.
class Reader {
public:
  explicit Reader(std::string_view text) : text_(text) {
    if (text_.starts_with("\xef\xbb\xbf")) text_.remove_prefix(3);
  }
  char next() {
    if (pos_ >= text_.size()) {
      eof_ = true;
      return '\n';
    }
    char c = text_[pos_++];
    if (c == '\r' && pos_ < text_.size() && text_[pos_] == '\n') c = text_[pos_++];
    if (c == '\n') ++line_;
    return c;
  }
  bool eof() const { return eof_; }
  int line() const { return line_; }
  void unread_line() { --line_; }  // git names the line an unterminated quote started on

private:
  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  bool eof_ = false;
};

// `[section]`, `[section.sub]` or `[section "sub"]`, after the '['.
bool read_header(Reader& r, std::string& section, std::optional<std::string>& sub) {
  section.clear();
  sub.reset();
  for (;;) {
    char c = r.next();
    if (r.eof()) return false;
    if (c == ']') break;
    if (is_space(c)) {  // the quoted form
      if (c == '\n') return false;
      do c = r.next();
      while (is_space(c) && c != '\n');
      if (c != '"') return false;
      std::string s;
      for (;;) {
        c = r.next();
        if (c == '\n') return false;
        if (c == '"') break;
        if (c == '\\') {
          c = r.next();
          if (c == '\n') return false;
        }
        s += c;
      }
      if (r.next() != ']') return false;
      sub = std::move(s);
      break;
    }
    if (!is_key_char(c) && c != '.') return false;
    section += lower(c);
  }
  if (section.empty()) return false;
  if (!sub) {  // [a.b]: a subsection, lowercased like the rest
    size_t dot = section.find('.');
    if (dot != std::string::npos) {
      sub = section.substr(dot + 1);
      section.resize(dot);
    }
  }
  return true;
}

// The value after '=' (config.c parse_value): nullopt on a syntax error.
std::optional<std::string> read_value(Reader& r) {
  std::string v;
  bool quote = false, comment = false;
  size_t space = 0;
  for (;;) {
    char c = r.next();
    if (c == '\n') {
      if (quote) {
        r.unread_line();
        return std::nullopt;
      }
      return v;
    }
    if (comment) continue;
    if (is_space(c) && !quote) {
      if (!v.empty()) ++space;
      continue;
    }
    if (!quote && (c == ';' || c == '#')) {
      comment = true;
      continue;
    }
    v.append(space, ' ');
    space = 0;
    if (c == '\\') {
      c = r.next();
      switch (c) {
        case '\n': continue;  // a continuation line
        case 't': c = '\t'; break;
        case 'b': c = '\b'; break;
        case 'n': c = '\n'; break;
        case '\\':
        case '"': break;
        default: return std::nullopt;
      }
      v += c;
      continue;
    }
    if (c == '"') {
      quote = !quote;
      continue;
    }
    v += c;
  }
}

}  // namespace

std::string Entry::key() const {
  std::string k = section;
  if (subsection) k += "." + *subsection;
  return k.empty() ? name : k + "." + name;
}

Parsed parse(std::string_view text) {
  Parsed out;
  Reader r(text);
  std::string section;
  std::optional<std::string> sub;
  bool comment = false;
  auto fail = [&](int line, std::string what) {
    out.error_line = line;
    out.error = std::move(what);
    return out;
  };
  for (;;) {
    char c = r.next();
    if (c == '\n') {
      if (r.eof()) return out;
      comment = false;
      continue;
    }
    if (comment || is_space(c)) continue;
    if (c == '#' || c == ';') {
      comment = true;
      continue;
    }
    if (c == '[') {
      int line = r.line();
      if (!read_header(r, section, sub)) return fail(line, "a malformed [section] header");
      continue;
    }
    if (!is_alpha(c))
      return fail(r.line(), fmt::format("a name cannot start with '{}'", escape(std::string_view(&c, 1))));
    Entry e;
    e.line = r.line();
    e.section = section;
    e.subsection = sub;
    e.name = lower(c);
    for (;;) {
      c = r.next();
      if (r.eof() || !is_key_char(c)) break;
      e.name += lower(c);
    }
    while (c == ' ' || c == '\t') c = r.next();
    if (c != '\n') {
      if (c != '=') return fail(e.line, fmt::format("expected '=' after {}", e.name));
      e.value = read_value(r);
      if (!e.value) return fail(r.line(), fmt::format("an unterminated quote or unknown escape in {}", e.name));
    }
    out.entries.push_back(std::move(e));
    if (r.eof()) return out;
  }
}

namespace {

// When a key's value matters.
enum class When {
  always,
  bang,          // the value starts with '!' (after blanks): a shell command
  git_options,   // alias: '!' runs a shell; -c/--config-env/--exec-path set what git runs
  ext_transport  // a remote URL in git's ext:: transport runs a command
};
// Whether the key has a subsection: [core] vs [filter "name"].
enum class Sub { none, any, either };

struct Rule {
  std::string_view section;
  Sub sub;
  std::string_view name;  // "*": any name
  When when;
  std::string_view why;
};

// The keys in a repository's config that make git run a command or
// reach a remote another way (git-config(1) of git 2.39). Settings that
// only name a proxy host (http.proxy, remote.<name>.proxy) or a file git
// reads (core.excludesFile, gpg.ssh.allowedSignersFile) run nothing and
// are not listed.
constexpr Rule kRules[] = {
    // Commands git runs by itself, on everyday commands (status, log, fetch).
    {"core", Sub::none, "fsmonitor", When::always, "a command git status and others run"},
    {"core", Sub::none, "hookspath", When::always, "moves hooks to another directory"},
    {"core", Sub::none, "sshcommand", When::always, "a command run for ssh remotes"},
    {"core", Sub::none, "gitproxy", When::always, "a command run for git:// remotes"},
    {"core", Sub::none, "alternaterefscommand", When::always, "a command run when fetching"},
    {"core", Sub::none, "askpass", When::always, "a command run for credentials"},
    {"core", Sub::none, "editor", When::always, "a command run for commit messages"},
    {"core", Sub::none, "pager", When::always, "a command run for paged output"},
    {"core", Sub::none, "worktree", When::always, "points git's work tree elsewhere"},
    {"pager", Sub::none, "*", When::always, "a pager command for one git command"},
    {"sequence", Sub::none, "editor", When::always, "a command run by git rebase -i"},
    {"interactive", Sub::none, "difffilter", When::always, "a command run by git add -p"},
    {"credential", Sub::either, "helper", When::always, "a command run for credentials"},
    {"uploadpack", Sub::none, "packobjectshook", When::always, "a command run when serving fetches"},
    {"imap", Sub::none, "tunnel", When::always, "a command run by git imap-send"},
    {"instaweb", Sub::none, "httpd", When::always, "a command run by git instaweb"},
    // Drivers that .gitattributes (also jail-written) attaches to paths.
    {"filter", Sub::any, "clean", When::always, "a filter command run on add and status"},
    {"filter", Sub::any, "smudge", When::always, "a filter command run on checkout"},
    {"filter", Sub::any, "process", When::always, "a long-running filter command"},
    {"diff", Sub::any, "textconv", When::always, "a command run by git diff and log"},
    {"diff", Sub::any, "command", When::always, "a command run by git diff"},
    {"diff", Sub::none, "external", When::always, "a command run by git diff"},
    {"merge", Sub::any, "driver", When::always, "a command run by merges"},
    // Tools that git runs on request.
    {"alias", Sub::none, "*", When::git_options, "an alias that runs a command or sets git's config"},
    {"difftool", Sub::any, "cmd", When::always, "a command run by git difftool"},
    {"difftool", Sub::any, "path", When::always, "a program run by git difftool"},
    {"mergetool", Sub::any, "cmd", When::always, "a command run by git mergetool"},
    {"mergetool", Sub::any, "path", When::always, "a program run by git mergetool"},
    {"browser", Sub::any, "cmd", When::always, "a command run by git help and instaweb"},
    {"browser", Sub::any, "path", When::always, "a program run by git help and instaweb"},
    {"man", Sub::any, "cmd", When::always, "a command run by git help"},
    {"man", Sub::any, "path", When::always, "a program run by git help"},
    {"guitool", Sub::any, "cmd", When::always, "a command run by git gui"},
    {"sendemail", Sub::either, "tocmd", When::always, "a command run by git send-email"},
    {"sendemail", Sub::either, "cccmd", When::always, "a command run by git send-email"},
    {"sendemail", Sub::either, "smtpserver", When::always, "a program git send-email may run"},
    {"tar", Sub::any, "command", When::always, "a command run by git archive"},
    {"trailer", Sub::any, "command", When::always, "a command run by git commit and interpret-trailers"},
    {"trailer", Sub::any, "cmd", When::always, "a command run by git commit and interpret-trailers"},
    {"submodule", Sub::any, "update", When::bang, "a command run by git submodule update"},
    // Signing: run on commit, tag, and log --show-signature.
    {"gpg", Sub::none, "program", When::always, "a signing program"},
    {"gpg", Sub::any, "program", When::always, "a signing program"},
    {"gpg", Sub::any, "defaultkeycommand", When::always, "a command run when signing"},
    // More config, read from a path the value names.
    {"include", Sub::none, "path", When::always, "includes more config from a file"},
    {"includeif", Sub::any, "path", When::always, "includes more config from a file"},
    // Transports: programs run on the other side of a local or ssh
    // remote, ext:: URLs (a command), and the switches that enable them.
    {"remote", Sub::any, "uploadpack", When::always, "a program run for fetches"},
    {"remote", Sub::any, "receivepack", When::always, "a program run for pushes"},
    {"remote", Sub::any, "url", When::ext_transport, "an ext:: URL runs a command"},
    {"remote", Sub::any, "pushurl", When::ext_transport, "an ext:: URL runs a command"},
    {"url", Sub::any, "insteadof", When::always, "rewrites remote URLs (can switch to ext::)"},
    {"url", Sub::any, "pushinsteadof", When::always, "rewrites remote URLs (can switch to ext::)"},
    {"protocol", Sub::none, "allow", When::always, "changes which transports git allows"},
    {"protocol", Sub::any, "allow", When::always, "changes which transports git allows"},
};

std::string_view trim_left(std::string_view v) {
  while (!v.empty() && is_space(v.front())) v.remove_prefix(1);
  return v;
}

bool applies(When when, const std::optional<std::string>& value) {
  std::string_view v = trim_left(value ? std::string_view(*value) : std::string_view());
  switch (when) {
    case When::always: return true;
    case When::bang: return v.starts_with('!');
    case When::git_options:
      return v.starts_with('!') || v.starts_with("-c") || v.find(" -c") != std::string_view::npos ||
             v.find("--config-env") != std::string_view::npos || v.find("--exec-path") != std::string_view::npos;
    case When::ext_transport: return lowered(v.substr(0, 5)) == "ext::";
  }
  return true;
}

}  // namespace

std::string_view command_reason(const Entry& e) {
  for (const auto& r : kRules) {
    if (e.section != r.section || (r.name != "*" && e.name != r.name)) continue;
    if (r.sub == Sub::none && e.subsection) continue;
    if (r.sub == Sub::any && !e.subsection) continue;
    if (applies(r.when, e.value)) return r.why;
  }
  return {};
}

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [&](unsigned char c) { out += fmt::format("\\x{:02x}", c); };
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c == '\\')
        out += "\\\\";
      else if (c < 0x20 || c == 0x7f)
        hex(c);
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence: no overlong form, no surrogate, at most U+10FFFF.
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    bool ok = len > 0 && i + len <= text.size();
    unsigned cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      ok = (cc & 0xc0) == 0x80;
      cp = (cp << 6) | (cc & 0x3f);
    }
    ok = ok && !(len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) &&
         !(len == 4 && (cp < 0x10000 || cp > 0x10ffff));
    if (!ok || (cp >= 0x80 && cp <= 0x9f)) {  // invalid, or a C1 control (CSI among them)
      for (size_t k = 0; k < (ok ? len : 1); ++k) hex(static_cast<unsigned char>(text[i + k]));
      i += ok ? len : 1;
      continue;
    }
    out.append(text.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace pj::git::config
