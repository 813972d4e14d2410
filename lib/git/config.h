// Git's config syntax (git-config(1), "CONFIGURATION FILE"), read well
// enough to find the settings that make the host's git run a command or
// switch transports. Pure: no filesystem, unit-tested. The text comes
// from a repository the jail could write (DESIGN property 6): every
// string from it is escaped before it is shown (escape()).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pj::git::config {

// One `name = value` (or a bare `name`, git's boolean true).
struct Entry {
  int line = 0;                           // where the name starts, from 1
  std::string section;                    // lowercased
  std::optional<std::string> subsection;  // [a "b"]: as written; [a.b]: lowercased
  std::string name;                       // lowercased
  std::optional<std::string> value;       // unquoted and unescaped; none for a bare name
  // section[.subsection].name, as git spells the key.
  std::string key() const;
};

struct Parsed {
  std::vector<Entry> entries;  // up to the first syntax error
  // The first syntax error (git refuses the whole file then): its line
  // and what was wrong; 0 when none.
  int error_line = 0;
  std::string error;
};

Parsed parse(std::string_view text);

// Why git may run a command, or connect another way, because of `e`
// (the key list, git-config(1) of git 2.39): a short phrase, or empty
// when the setting does not.
std::string_view command_reason(const Entry& e);

// Bytes from the jail made safe for a terminal and for JSON: printable
// ASCII as is (a backslash doubled), valid UTF-8 other than C1 controls
// as is, everything else (C0 controls, DEL, C1, invalid UTF-8) as \xNN.
// A local stand-in for a shared helper in lib/util; same contract.
std::string escape(std::string_view bytes);

}  // namespace pj::git::config
