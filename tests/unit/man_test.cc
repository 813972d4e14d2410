// pi-jail(1) and --help list the same options (test-only switches aside).
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in, "cannot read " << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool test_only(const std::string& opt) { return opt.starts_with("--test-") || opt.starts_with("--unsafe-test-"); }

// The options in `text` (no <regex>: GCC 12's -Wmaybe-uninitialized
// trips on it in the sanitizer build): each -x or --long-name that starts
// the text or follows a space or a quote.
std::vector<std::string> options_in(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '-' || (i > 0 && text[i - 1] != ' ' && text[i - 1] != '"')) continue;
    size_t j = i + (i + 1 < text.size() && text[i + 1] == '-' ? 2 : 1);
    if (j >= text.size() || text[j] < 'a' || text[j] > 'z') continue;
    size_t end = j;
    while (end < text.size() && ((text[end] >= 'a' && text[end] <= 'z') || text[end] == '-')) ++end;
    out.push_back(text.substr(i, end - i));
    i = end;
  }
  return out;
}

// The options --help describes: each "  -x, --long" or "  --long" line.
std::set<std::string> help_options() {
  std::istringstream in(pj::cli::kUsage);
  std::set<std::string> out;
  for (std::string l; std::getline(in, l);) {
    if (!l.starts_with("  -")) continue;
    size_t first = l.find_first_not_of(' ');
    size_t gap = l.find("  ", first);  // the description starts after two spaces
    for (const auto& o : options_in(l.substr(0, gap)))
      if (!test_only(o)) out.insert(o);
  }
  return out;
}

// The options pi-jail(1) describes: the tags (the line after each .TP) of
// its OPTIONS section.
std::set<std::string> man_options() {
  std::string man = read_text(std::string(PJ_SOURCE_DIR) + "/man/pi-jail.1");
  size_t from = man.find("\n.SH OPTIONS\n");
  size_t to = man.find("\n.SH ", from + 1);
  REQUIRE(from != std::string::npos);
  std::istringstream in(man.substr(from, to - from));
  std::set<std::string> out;
  bool tag = false;
  for (std::string l; std::getline(in, l);) {
    if (l == ".TP") {
      tag = true;
      continue;
    }
    if (!tag) continue;
    tag = false;
    std::string plain;
    for (size_t i = 0; i < l.size(); ++i)
      if (!(l[i] == '\\' && i + 1 < l.size() && l[i + 1] == '-')) plain += l[i];
    for (const auto& o : options_in(plain))
      if (!test_only(o)) out.insert(o);
  }
  return out;
}

}  // namespace

TEST_CASE("pi-jail(1) describes exactly the options --help lists") {
  auto help = help_options();
  auto man = man_options();
  CHECK(help.count("--workspace"));
  CHECK(help.count("-p"));
  CHECK(man.count("--workspace"));
  CHECK(man.count("-w"));
  for (const auto& o : help) CHECK_MESSAGE(man.count(o), o << " is in --help but not in pi-jail(1)'s OPTIONS");
  for (const auto& o : man) CHECK_MESSAGE(help.count(o), o << " is in pi-jail(1)'s OPTIONS but not in --help");
}

TEST_CASE("pi-jail(1) names every subcommand") {
  std::string man = read_text(std::string(PJ_SOURCE_DIR) + "/man/pi-jail.1");
  for (const char* sub : {"doctor", "explain", "shell-init", "help"}) {
    CAPTURE(sub);
    const std::string usage = pj::cli::kUsage;
    CHECK((usage.find(std::string("pi-jail ") + sub + " ") != std::string::npos ||
           usage.find(std::string("[OPTIONS] ") + sub + " ") != std::string::npos));
    CHECK(man.find(std::string(".TP\n.B ") + sub + "\n") != std::string::npos);
  }
}

TEST_CASE("the bash, zsh and fish completions offer every option --help lists, and the subcommands") {
  for (const char* file : {"pi-jail.bash", "_pi-jail", "pi-jail.fish"}) {
    CAPTURE(file);
    std::string text = read_text(std::string(PJ_SOURCE_DIR) + "/completions/" + file);
    for (const auto& o : help_options()) {
      // fish spells --long as "-l long" and -x as "-s x".
      std::string fish = o.starts_with("--") ? "-l " + o.substr(2) : "-s " + o.substr(1);
      CHECK_MESSAGE((text.find(o) != std::string::npos || text.find(fish) != std::string::npos), o << " missing");
    }
    for (const char* sub : {"explain", "doctor", "shell-init", "help"}) CHECK(text.find(sub) != std::string::npos);
  }
}
