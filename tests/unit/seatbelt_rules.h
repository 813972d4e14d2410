// A Seatbelt profile's rules as text, for the tests that say what a
// profile allows and what it leaves denied (seatbelt/sbpl.h reads it).
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "seatbelt/sbpl.h"

namespace pj::test {

// An expression as text: (param "X") as X, lists in parentheses.
inline std::string sbpl_text(const seatbelt::Expr& e) {
  if (e.kind != seatbelt::Expr::Kind::list) return e.text;
  if (e.items.size() == 2 && e.items[0].text == "param") return e.items[1].text;
  std::string out;
  for (const auto& i : e.items) out += (out.empty() ? "" : " ") + sbpl_text(i);
  return out;
}

// Every operation the profile allows, with the filters of each rule
// allowing it ("" for a rule without one), and the forms that deny.
struct SbplRules {
  std::map<std::string, std::vector<std::string>> allowed;
  std::vector<std::string> denied;
};
inline SbplRules sbpl_rules(const std::string& profile) {
  auto forms = seatbelt::read_sbpl(profile);
  REQUIRE(forms.ok());
  SbplRules r;
  for (const auto& f : *forms) {
    if (f.items.empty() || f.items[0].text == "version") continue;
    if (f.items[0].text == "deny") {
      r.denied.push_back(sbpl_text(f));
      continue;
    }
    REQUIRE(f.items[0].text == "allow");
    std::vector<std::string> ops, filters;
    for (size_t i = 1; i < f.items.size(); ++i)
      (f.items[i].kind == seatbelt::Expr::Kind::symbol ? ops : filters).push_back(sbpl_text(f.items[i]));
    for (const auto& op : ops) {
      auto& to = r.allowed[op];
      if (filters.empty()) to.push_back("");
      to.insert(to.end(), filters.begin(), filters.end());
    }
  }
  return r;
}

}  // namespace pj::test
