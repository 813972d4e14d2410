#include "seatbelt/sbpl.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

namespace pj::seatbelt {

using util::Error;

const std::vector<std::string_view>& known_operations() {
  static const std::vector<std::string_view> ops = {
      "default",        "process-fork",       "process-exec",         "signal",          "process-info*",
      "sysctl-read",    "mach-host*",         "user-preference-read", "mach-lookup",     "file-read*",
      "file-read-data", "file-read-metadata", "file-write*",          "file-write-data", "file-ioctl",
      "pseudo-tty",     "network-outbound",   "network-inbound",      "network-bind"};
  return ops;
}

const std::vector<std::string_view>& known_filters() {
  static const std::vector<std::string_view> filters = {
      "subpath",     "literal", "regex",       "require-all",        "require-any",
      "require-not", "target",  "sysctl-name", "sysctl-name-prefix", "global-name",
      "extension",   "remote",  "local"};
  return filters;
}

namespace {

bool known(const std::vector<std::string_view>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

class Reader {
public:
  explicit Reader(std::string_view t) : t_(t) {}

  util::Result<std::vector<Expr>> all() {
    std::vector<Expr> out;
    while (true) {
      skip();
      if (i_ >= t_.size()) return out;
      auto e = one();
      if (!e) return e.take_error();
      out.push_back(std::move(*e));
    }
  }

private:
  Error fail(std::string what) const { return Error::invalid(fmt::format("profile line {}: {}", line_, what)); }

  void skip() {
    while (i_ < t_.size()) {
      char c = t_[i_];
      if (c == ';') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        if (c == '\n') ++line_;
        ++i_;
      } else {
        return;
      }
    }
  }

  util::Result<std::string> quoted() {  // at the opening quote
    ++i_;
    std::string s;
    while (i_ < t_.size() && t_[i_] != '"') {
      if (t_[i_] == '\n') return fail("a string runs past the end of its line");
      if (t_[i_] == '\\') {
        if (++i_ >= t_.size()) break;
        if (t_[i_] != '"' && t_[i_] != '\\') return fail(fmt::format("unknown escape \\{} in a string", t_[i_]));
      }
      s += t_[i_++];
    }
    if (i_ >= t_.size()) return fail("a string does not end");
    ++i_;
    return s;
  }

  util::Result<Expr> one() {
    Expr e;
    e.line = line_;
    char c = t_[i_];
    if (c == '(') {
      ++i_;
      e.kind = Expr::Kind::list;
      while (true) {
        skip();
        if (i_ >= t_.size()) return fail(fmt::format("the list opened on line {} is not closed", e.line));
        if (t_[i_] == ')') {
          ++i_;
          return e;
        }
        auto item = one();
        if (!item) return item.take_error();
        e.items.push_back(std::move(*item));
      }
    }
    if (c == ')') return fail("a ')' closes nothing");
    if (c == '"') {
      auto s = quoted();
      if (!s) return s.take_error();
      e.kind = Expr::Kind::string;
      e.text = std::move(*s);
      return e;
    }
    if (c == '#' && i_ + 1 < t_.size() && t_[i_ + 1] == '"') {
      ++i_;
      auto s = quoted();
      if (!s) return s.take_error();
      e.kind = Expr::Kind::regex;
      e.text = std::move(*s);
      return e;
    }
    auto symbol_char = [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '*' || ch == '.' || ch == '_';
    };
    if (!symbol_char(c)) return fail(fmt::format("unexpected character '{}'", c));
    size_t start = i_;
    while (i_ < t_.size() && symbol_char(t_[i_])) ++i_;
    e.text = std::string(t_.substr(start, i_ - start));
    e.kind =
        std::all_of(e.text.begin(), e.text.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })
            ? Expr::Kind::number
            : Expr::Kind::symbol;
    return e;
  }

  std::string_view t_;
  size_t i_ = 0;
  int line_ = 1;
};

bool is_symbol(const Expr& e, std::string_view s) { return e.kind == Expr::Kind::symbol && e.text == s; }

struct Checker {
  const std::vector<std::string>& params;
  std::set<std::string> used;

  util::Status fail(const Expr& e, std::string what) const {
    return Error::invalid(fmt::format("profile line {}: {}", e.line, what));
  }

  // A path argument: a string, or (param "NAME").
  util::Status path_arg(const Expr& e) {
    if (e.kind == Expr::Kind::string) return {};
    if (e.kind == Expr::Kind::list && e.items.size() == 2 && is_symbol(e.items[0], "param") &&
        e.items[1].kind == Expr::Kind::string) {
      if (!known(std::vector<std::string_view>(params.begin(), params.end()), e.items[1].text))
        return fail(e, fmt::format("(param \"{}\") is not a parameter of this profile", e.items[1].text));
      used.insert(e.items[1].text);
      return {};
    }
    return fail(e, "expected a string or (param \"NAME\")");
  }

  util::Status filter(const Expr& e) {
    if (e.kind != Expr::Kind::list || e.items.empty() || e.items[0].kind != Expr::Kind::symbol)
      return fail(e, "expected a filter such as (subpath ...)");
    const std::string& f = e.items[0].text;
    if (!known(known_filters(), f)) return fail(e, fmt::format("unknown filter '{}'", f));
    size_t n = e.items.size() - 1;
    if (f == "require-all" || f == "require-any" || f == "require-not") {
      if (n == 0 || (f == "require-not" && n != 1)) return fail(e, fmt::format("({} ...) with {} filters", f, n));
      for (size_t i = 1; i < e.items.size(); ++i)
        if (auto st = filter(e.items[i]); !st) return st;
      return {};
    }
    const bool address = f == "remote" || f == "local";
    if (n != (address ? 2U : 1U)) return fail(e, fmt::format("({} ...) takes {} argument(s)", f, address ? 2 : 1));
    const Expr& arg = e.items.back();
    if (f == "subpath" || f == "literal") return path_arg(arg);
    if (f == "regex") return arg.kind == Expr::Kind::regex ? util::Status{} : fail(e, "regex takes #\"...\"");
    if (f == "target")
      return is_symbol(arg, "same-sandbox") || is_symbol(arg, "self") ? util::Status{}
                                                                      : fail(e, "target: only same-sandbox or self");
    if (address) {
      if (!is_symbol(e.items[1], "tcp")) return fail(e, fmt::format("{}: only tcp", f));
      if (arg.kind != Expr::Kind::list)
        return fail(e, fmt::format("{} tcp takes (param \"NAME\")", f));  // never * or text
      return path_arg(arg);
    }
    return arg.kind == Expr::Kind::string ? util::Status{} : fail(e, fmt::format("({} ...) takes a string", f));
  }

  util::Status form(const Expr& e) {
    if (e.kind != Expr::Kind::list || e.items.empty()) return fail(e, "expected a list at the top level");
    if (is_symbol(e.items[0], "version")) {
      if (e.items.size() != 2 || e.items[1].text != "1") return fail(e, "only (version 1)");
      return {};
    }
    if (!is_symbol(e.items[0], "allow") && !is_symbol(e.items[0], "deny"))
      return fail(e, "a top-level form must be version, allow or deny");
    size_t i = 1;
    for (; i < e.items.size() && e.items[i].kind == Expr::Kind::symbol; ++i)
      if (!known(known_operations(), e.items[i].text))
        return fail(e.items[i], fmt::format("unknown operation '{}'", e.items[i].text));
    if (i == 1) return fail(e, "a rule names no operation");
    if (is_symbol(e.items[1], "default") && (e.items.size() != 2 || !is_symbol(e.items[0], "deny")))
      return fail(e, "only (deny default)");
    if (is_symbol(e.items[0], "allow"))
      if (auto st = network_filters(e, i); !st) return st;
    for (; i < e.items.size(); ++i)
      if (auto st = filter(e.items[i]); !st) return st;
    return {};
  }

  // An allowed network operation names its addresses, each on the side
  // it is checked on: binding and accepting by the local address,
  // connecting by the remote one. A bare rule would allow every address;
  // a local filter on an outbound rule matches a socket not yet bound,
  // whatever it connects to.
  util::Status network_filters(const Expr& e, size_t first_filter) const {
    for (size_t op = 1; op < first_filter; ++op) {
      const std::string& name = e.items[op].text;
      if (!name.starts_with("network-")) continue;
      if (first_filter == e.items.size()) return fail(e, fmt::format("(allow {}) names no address", name));
      const std::string_view side = name == "network-outbound" ? "remote" : "local";
      for (size_t i = first_filter; i < e.items.size(); ++i)
        if (e.items[i].kind != Expr::Kind::list || e.items[i].items.empty() || !is_symbol(e.items[i].items[0], side))
          return fail(e.items[i], fmt::format("{} takes ({} tcp (param \"NAME\")) filters only", name, side));
    }
    return {};
  }
};

}  // namespace

util::Result<std::vector<Expr>> read_sbpl(std::string_view text) { return Reader(text).all(); }

util::Status check_profile(std::string_view text, const std::vector<std::string>& params) {
  auto forms = read_sbpl(text);
  if (!forms) return forms.take_error();
  if (forms->size() < 2 || !is_symbol(forms->at(0).items.empty() ? Expr{} : forms->at(0).items[0], "version") ||
      forms->at(1).items.size() != 2 || !is_symbol(forms->at(1).items[0], "deny") ||
      !is_symbol(forms->at(1).items[1], "default"))
    return Error::invalid("a profile starts with (version 1) and (deny default)");
  Checker c{params, {}};
  for (const auto& f : *forms)
    if (auto st = c.form(f); !st) return st;
  for (const auto& p : params)
    if (!c.used.count(p)) return Error::invalid(fmt::format("parameter {} is not used by the profile", p));
  return {};
}

}  // namespace pj::seatbelt
