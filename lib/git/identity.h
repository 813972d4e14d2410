// The host's git identity for the jail, without its secrets: the entries
// of the caller's ~/.gitconfig and $XDG_CONFIG_HOME/git/config (else
// ~/.config/git/config) whose key is on an explicit allowlist (user.name,
// user.email, init.defaultBranch, core.editor, color.*, pull.rebase, ...),
// written as a new config file that is shown read-only inside at
// $HOME/.config/git/config. Never passed: credential.*, url.*.insteadOf
// (tokens in URLs), http.* (extra headers), include/includeIf (other
// files), core.sshCommand, core.hooksPath, alias.* (`!` runs a shell),
// filter.*, gpg.* and signing, and every key not on the list.
//
// Git reads ~/.gitconfig after the XDG file, so the jail home's own
// ~/.gitconfig (writable, made empty if missing so that `git config
// --global` writes there) overrides the host's values for that workspace.
// The synthesized file also sets core.sshCommand to a command that says
// why ssh cannot work inside (no DNS, the filter passes HTTP(S) and SOCKS5
// only) instead of ssh's "Could not resolve hostname".
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "git/config.h"
#include "util/result.h"

namespace pj::git::identity {

// Whether `e` may be shown to the jail (the allowlist). Pure.
bool allowed(const git::config::Entry& e);

// The config text for the jail from the host files' texts, in git's
// reading order, and the keys left out (for -v). A file with a syntax
// error contributes nothing (git would refuse it too): its problem is
// added to `left_out`. Pure.
std::string synthesize(const std::vector<std::pair<std::string, std::string>>& files,  // name, text
                       std::vector<std::string>& left_out);

// Read the caller's git config files (`home`, $XDG_CONFIG_HOME), write
// the synthesized text under `state_dir`/gitconfig/ (named by a hash of
// its content, written once, 0600) and return its path. Problems reading
// a host file are warnings: the jail then gets less, never more.
util::Result<std::string> prepare(const std::string& state_dir, const std::string& home);

namespace detail {

// prepare()'s last step: `text` written as `dir_path`/<hash of text>
// (the directory made 0700 if missing), unless a file there holds it
// already; the file's path. `after_check` (tests) runs after the look
// for an existing copy, as a concurrent run publishing at that moment
// would.
util::Result<std::string> publish(const std::string& dir_path, const std::string& text,
                                  const std::function<void()>& after_check = {});

}  // namespace detail

}  // namespace pj::git::identity
