// Pi's /login under pi-jail, as a person does it: the real Pi in a jail,
// interactive in a terminal (tmux); the hosts its OAuth modules log in at
// (pi-ai dist/auth/oauth/*.js) served by one HTTPS stand-in that the
// network filter reaches through --test-resolve; the test playing the
// browser on the callback ports pi-jail serves on the host's loopback
// (supervisor/login_callbacks.h); pi-jail's consent question when Pi
// leaves (credentials/consent.h). Shared by login_callback_e2e_test.cc
// and login_flows_e2e_test.cc.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness.h"
#include "pi_world.h"
#include "stand_in.h"

namespace pj::test {

// The hosts the stand-in answers for, each also a name of its certificate.
extern const std::vector<std::string> kLoginHosts;

// What the stand-in (kLoginStandIn in login_flow.cc) issues. Every token
// is unique to the test (unique_token()), so that finding one in a file
// or on a screen means it came from here.
struct IssuedTokens {
  std::string code;           // the authorization code the browser brings
  std::string issued_client;  // the client id Sign in with ChatGPT's redirect brings
  // Per auth.json entry: what Pi stores as "access" and "refresh".
  struct Pair {
    std::string access, refresh;
  };
  std::vector<std::pair<std::string, Pair>> pairs;

  // New tokens for each of `entries` (Pi's provider ids).
  static IssuedTokens make(const std::vector<std::string>& entries);
  const Pair& of(const std::string& entry) const;
  std::string json() const;
};

// Pi from `prefix`, jailed, interactive, started from a world whose host
// auth.json holds `auth` (nullopt: the host has no auth.json); the
// stand-in issues `issued`. `jail_opts`: more options of pi-jail.
class JailedLogin {
public:
  JailedLogin(const std::string& prefix, const std::optional<std::string>& auth, const IssuedTokens& issued,
              const std::vector<std::string>& jail_opts = {});
  ~JailedLogin();
  JailedLogin(const JailedLogin&) = delete;
  JailedLogin& operator=(const JailedLogin&) = delete;

  // /login `provider`; the screen then shows `shows` (REQUIRE).
  void login(const std::string& provider, const std::string& shows);
  // In the selector on screen, move to the item `label` and take it; the
  // screen then shows `shows` (REQUIRE; "": nothing to wait for, as for
  // a device login approved at once, whose code may show only briefly).
  void pick(const std::string& label, const std::string& shows);
  // Type `line` and Enter into the prompt on screen; then `shows` (as
  // for pick()).
  void answer(const std::string& line, const std::string& shows);
  // The URL on screen starting with `start`, joined again from the lines
  // the TUI wrapped it over; "" when there is none.
  std::string url(const std::string& start);
  // The browser opening `url` on the host, tried again while nothing
  // listens on its port (pi-jail looks a few times a second).
  Outcome browse(const std::string& url);
  // Pi's note that the login to `name` (its provider's name in Pi)
  // finished; false when it did not show (a guard, not a timing check).
  bool logged_in(const std::string& name);
  // Leave Pi: pi-jail asks whether the jail's logins replace the host's;
  // the question must name each of `entries`. Answer `reply`, wait for the
  // run's end; returns the question as shown.
  std::string leave(const std::vector<std::string>& entries, const std::string& reply);

  std::string screen() { return term_->screen(); }
  // What Pi's auth.json inside the jail holds for `entry`, asked with Pi's
  // own `!` shell: "real" (a token the stand-in issued for it), "other"
  // (the entry is there, without them: placeholders), "none" (no such
  // entry), or "" when the answer did not show.
  std::string jail_auth_of(const IssuedTokens& issued, const std::string& entry);
  // The host's auth.json now, and one field of one of its entries as
  // JSON reads it ("(no entry)", "(none)" when it has none).
  std::string host_auth() const;
  // Whether the host has an auth.json, and its permission bits.
  bool host_has_auth() const;
  unsigned host_auth_mode() const;
  // The host's auth.json's entry names, sorted, and one entry as Python's
  // JSON writer spells it (sorted keys), to compare entries, not bytes.
  std::vector<std::string> host_entries() const;
  std::string host_entry(const std::string& entry) const;
  std::string host_field(const std::string& entry, const std::string& field) const;
  // One top-level value of the host's settings.json as JSON reads it
  // ("(none)" when it has none).
  std::string host_setting(const std::string& name) const;
  // Every request the stand-in got: "LINE host=... auth=... body=...".
  std::string seen() const { return server_->log(); }

  PiWorld w;

private:
  std::unique_ptr<StandInServer> server_;
  std::unique_ptr<Tmux> term_;
  std::string done_;  // what the shell prints when pi-jail ends
};

// A query parameter's value in `url` ([A-Za-z0-9_%.-]: what Pi's
// URLSearchParams writes for a state or a redirect URI).
std::string param(const std::string& url, const std::string& name);

}  // namespace pj::test
