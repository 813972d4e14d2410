// Git's config syntax, the list of keys that make git run commands, and
// the escaping of what the jail wrote.
#include <doctest/doctest.h>

#include "git/config.h"

using namespace pj::git::config;

namespace {

const Entry* find(const Parsed& p, std::string_view key) {
  for (const auto& e : p.entries)
    if (e.key() == key) return &e;
  return nullptr;
}

Entry entry(std::string section, std::optional<std::string> sub, std::string name, std::string value) {
  Entry e;
  e.section = std::move(section);
  e.subsection = std::move(sub);
  e.name = std::move(name);
  e.value = std::move(value);
  return e;
}

}  // namespace

TEST_CASE("sections, subsections in both spellings, case-insensitive names") {
  auto p = parse("[Core]\n\tFSMonitor = touch x\n[remote \"Origin\"]\n\turl = u\n[Diff.Foo]\n  textConv=cat\n");
  CHECK(p.error_line == 0);
  REQUIRE(p.entries.size() == 3);
  CHECK(p.entries[0].key() == "core.fsmonitor");
  CHECK(p.entries[0].line == 2);
  CHECK(*p.entries[0].value == "touch x");
  CHECK(p.entries[1].key() == "remote.Origin.url");  // a quoted subsection keeps its case
  CHECK(p.entries[2].key() == "diff.foo.textconv");  // [a.b] is lowercased, as git does
  CHECK(*p.entries[2].value == "cat");
}

TEST_CASE("values: quotes, escapes, comments, continuation lines, bare booleans") {
  auto p = parse(
      "# comment\n; another\n[alias]\n"
      "  a = \"!echo ; not a comment\" # a comment\n"
      "  b = one \\\n   two\n"
      "  c = tab\\there\\\\ \\\"q\\\"\n"
      "  flag\n"
      "  d = trailing   \n"
      "[core] editor = vi\n");
  CHECK(p.error_line == 0);
  CHECK(*find(p, "alias.a")->value == "!echo ; not a comment");
  const Entry* b = find(p, "alias.b");
  REQUIRE(b);
  CHECK(*b->value == "one    two");
  CHECK(b->line == 5);
  CHECK(*find(p, "alias.c")->value == "tab\there\\ \"q\"");
  CHECK_FALSE(find(p, "alias.flag")->value.has_value());
  CHECK(*find(p, "alias.d")->value == "trailing");
  const Entry* ed = find(p, "core.editor");  // a key on the header's own line
  REQUIRE(ed);
  CHECK(ed->line == 10);
  CHECK(find(p, "alias.c")->line == 7);
}

TEST_CASE("CRLF line ends and a byte-order mark are read as git reads them") {
  auto p = parse("\xef\xbb\xbf[core]\r\n\tpager = less\r\n\tsshCommand = ssh -i k\r\n");
  CHECK(p.error_line == 0);
  CHECK(*find(p, "core.pager")->value == "less");
  CHECK(find(p, "core.sshcommand")->line == 3);
}

TEST_CASE("a syntax error stops the parse and names its line") {
  auto p = parse("[core]\n\teditor = vi\n\t= nothing\n\tpager = less\n");
  CHECK(p.error_line == 3);
  CHECK_FALSE(p.error.empty());
  CHECK(p.entries.size() == 1);
  CHECK(parse("[core\n").error_line == 1);
  CHECK(parse("[a \"unterminated]\n").error_line == 1);
  CHECK(parse("[a]\nb = \"open quote\nc = d\n").error_line == 2);
  CHECK(parse("[a]\nb = bad \\q escape\n").error_line == 2);
}

TEST_CASE("a name before any section is a key without one, as git reads it") {
  auto p = parse("key = value\n");
  CHECK(p.error_line == 0);
  REQUIRE(p.entries.size() == 1);
  CHECK(p.entries[0].key() == "key");
}

TEST_CASE("an escaped quote or backslash inside a subsection") {
  auto p = parse("[filter \"a\\\"b\\\\c\"]\n\tclean = x\n");
  REQUIRE(p.entries.size() == 1);
  CHECK(*p.entries[0].subsection == "a\"b\\c");
  CHECK_FALSE(command_reason(p.entries[0]).empty());
}

TEST_CASE("the keys that make the host's git run a command") {
  const char* running[][3] = {
      {"core", "", "fsmonitor"},
      {"core", "", "hookspath"},
      {"core", "", "sshcommand"},
      {"core", "", "pager"},
      {"core", "", "editor"},
      {"core", "", "askpass"},
      {"core", "", "gitproxy"},
      {"core", "", "alternaterefscommand"},
      {"core", "", "worktree"},
      {"sequence", "", "editor"},
      {"credential", "", "helper"},
      {"credential", "https://x", "helper"},
      {"filter", "lfs", "clean"},
      {"filter", "lfs", "smudge"},
      {"filter", "lfs", "process"},
      {"diff", "bin", "textconv"},
      {"diff", "bin", "command"},
      {"diff", "", "external"},
      {"merge", "m", "driver"},
      {"include", "", "path"},
      {"includeif", "gitdir:/x/", "path"},
      {"gpg", "", "program"},
      {"gpg", "ssh", "program"},
      {"gpg", "ssh", "defaultkeycommand"},
      {"uploadpack", "", "packobjectshook"},
      {"remote", "origin", "uploadpack"},
      {"remote", "origin", "receivepack"},
      {"protocol", "", "allow"},
      {"protocol", "ext", "allow"},
      {"url", "ext::sh -c x", "insteadof"},
      {"url", "x", "pushinsteadof"},
      {"pager", "", "log"},
      {"interactive", "", "difffilter"},
      {"difftool", "t", "cmd"},
      {"mergetool", "t", "path"},
      {"browser", "b", "cmd"},
      {"man", "m", "cmd"},
      {"guitool", "g", "cmd"},
      {"instaweb", "", "httpd"},
      {"imap", "", "tunnel"},
      {"sendemail", "", "tocmd"},
      {"sendemail", "id", "smtpserver"},
      {"tar", "tgz", "command"},
      {"trailer", "t", "cmd"},
  };
  for (const auto& r : running) {
    CAPTURE(r[0]);
    CAPTURE(r[1]);
    CAPTURE(r[2]);
    auto e = entry(r[0], *r[1] ? std::optional<std::string>(r[1]) : std::nullopt, r[2], "x");
    CHECK_FALSE(command_reason(e).empty());
  }
  const char* harmless[][3] = {
      {"core", "", "bare"},        {"core", "", "filemode"},      {"user", "", "name"},
      {"remote", "origin", "url"}, {"remote", "origin", "fetch"}, {"http", "", "proxy"},
      {"filter", "", "clean"},     {"diff", "", "textconv"},      {"branch", "main", "remote"},
      {"core", "x", "fsmonitor"},  {"include", "x", "other"},     {"uploadpack", "", "hiderefs"},
  };
  for (const auto& r : harmless) {
    CAPTURE(r[0]);
    CAPTURE(r[2]);
    auto e = entry(r[0], *r[1] ? std::optional<std::string>(r[1]) : std::nullopt, r[2], "x");
    CHECK(command_reason(e).empty());
  }
}

TEST_CASE("keys that run a command only for some values") {
  CHECK_FALSE(command_reason(entry("alias", std::nullopt, "x", "!rm -rf /")).empty());
  CHECK_FALSE(command_reason(entry("alias", std::nullopt, "x", "  !cmd")).empty());
  CHECK_FALSE(command_reason(entry("alias", std::nullopt, "st", "-c core.pager=evil status")).empty());
  CHECK(command_reason(entry("alias", std::nullopt, "co", "checkout")).empty());
  CHECK_FALSE(command_reason(entry("submodule", "s", "update", "!sh x")).empty());
  CHECK(command_reason(entry("submodule", "s", "update", "rebase")).empty());
  CHECK_FALSE(command_reason(entry("remote", "o", "url", "ext::sh -c evil")).empty());
  CHECK_FALSE(command_reason(entry("remote", "o", "pushurl", "EXT::sh")).empty());
}

TEST_CASE("escape shows control characters and invalid UTF-8 as \\xNN") {
  CHECK(escape("plain text") == "plain text");
  CHECK(escape("a\x1b[31mb") == "a\\x1b[31mb");
  CHECK(escape("cr\rlf\n\ttab") == "cr\\x0dlf\\x0a\\x09tab");
  CHECK(escape("back\\slash") == "back\\\\slash");
  CHECK(escape("caf\xc3\xa9") == "caf\xc3\xa9");       // valid UTF-8 stays
  CHECK(escape("\xc3") == "\\xc3");                    // truncated sequence
  CHECK(escape("\xc0\xaf") == "\\xc0\\xaf");           // overlong
  CHECK(escape("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(escape("\xc2\x9b") == "\\xc2\\x9b");           // C1 CSI
  CHECK(escape("\x7f") == "\\x7f");
  CHECK(escape(std::string_view("\0z", 2)) == "\\x00z");
}
