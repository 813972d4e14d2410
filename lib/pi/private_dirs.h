// The run's own copies of the policy's private directories (the pi
// profile: Pi's agent dir). Inside the jail such a directory is a staging
// directory in pi-jail's state directory, which no jail sees otherwise:
// the files at the top of the host directory are copied in (the jail may
// change its copies: Pi writes auth.json, models-store.json, lock
// directories), its subdirectories are shown read-only, and whatever the
// jail writes there is discarded when the run ends, except the write_back
// files, whose data values are merged back into the host's
// (pi/agent_state.h). So an absent file (an extension, a `!command` key, a
// tool in bin/) can be neither created nor changed for a later Pi, and no
// placeholder is needed there.
//
// Each run's staging lives in <state>/runs/<id>/, locked (flock) by its
// run; a start removes the staging of runs that died (SIGKILL).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pi/login_consent.h"
#include "pi/agent_state.h"
#include "pi/user_links.h"
#include "runtime/profile_adapter.h"
#include "runtime/request.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace pj::pi {

// A file of a private directory whose secrets never enter the jail
// (credentials/credentials.h): the jail's copy is made from the host's by
// `to_jail` (placeholders), and what the jail leaves is mapped back by
// `from_jail` (real values) before it is merged into the host's. Such a file must be
// a regular file of at most 1 MiB: anything else refuses the run.
// What the jail left in a secret file, mapped back: the text with real
// values, and the logins in it (entries written back only with consent).
struct RevealedSecret {
  std::string text;
  std::vector<HeldLogin> held;
};

struct SecretFile {
  std::string name;  // "auth.json"
  std::function<util::Result<std::string>(std::string_view host)> to_jail;
  // `jail`: what the jail left; `given_jail`: what to_jail gave it.
  std::function<util::Result<RevealedSecret>(std::string_view jail, std::string_view given_jail)> from_jail;
};

// Whether a directory the run made in a hidden subdirectory may join the
// host's (the profile's adapter says).
using runtime::KeepNew;

class PrivateCopies {
public:
  // Stage every private directory of `r` (its private_dirs) and fill
  // r.private_views. Nothing of the host directory is followed or waited
  // on: entries are listed with O_NOFOLLOW, files copied through
  // util/untrusted.h (at most 1 MiB each; a larger file is shown
  // read-only instead); a symlink to a regular file is read through
  // when follow_user_link() allows it (pi/user_links.h), else left out and
  // said; one to a directory is recreated as it is.
  // `secret`, when given, names the file copied in through its transform.
  static util::Result<PrivateCopies> stage(const std::string& state_dir, runtime::Request& r,
                                           const SecretFile* secret = nullptr);

  PrivateCopies(PrivateCopies&&) = default;
  PrivateCopies& operator=(PrivateCopies&&) = default;
  ~PrivateCopies() { discard(); }

  // After the run: remove from each data directory (sessions/) what the
  // jail planted for the host's own Pi to follow later (symlinks, FIFOs,
  // sockets, devices: Pi appends to session files, and would append
  // through a link to ~/.bashrc); merge each write_back file back into the
  // host's (under Pi's own lock), report what was and was not written
  // back, then remove the staging. Returns the notes for stderr and the report, each
  // starting with "applied:", "refused:" or "kept:" (pi/agent_state.h).
  // Entries of the secret file that are logins made in the jail are held
  // back (everything else is written back): held_logins() lists them,
  // settle_logins() writes them when `c` is Consent::given, and returns
  // the notes either way. Call after finish().
  std::vector<std::string> finish();
  std::vector<HeldLogin> held_logins() const { return held_ ? held_->logins : std::vector<HeldLogin>{}; }
  std::vector<std::string> settle_logins(Consent c);

  // Directories the run makes in a hidden subdirectory are discarded
  // unless `keep` says they belong on the host (runtime::Request's
  // private_hidden).
  void keep_new_dirs(KeepNew keep) { keep_new_ = std::move(keep); }

private:
  struct Copy {
    std::string host_dir;  // the private directory on the host
    std::string staging;
    // Each write_back file of this directory: its name, and the content
    // copied in (nullopt: it did not exist at the start).
    std::vector<std::pair<std::string, std::optional<std::string>>> given;
    // The secret file as the jail was given it (placeholders), when it was.
    std::optional<std::string> secret_given;
    // Write grants inside the directory (Pi's sessions/): data the jail
    // writes in place, scrubbed after the run (see finish()).
    std::vector<std::string> data_dirs;
    // Subdirectories not shown, only the data directories below them are
    // (host paths): the request's private_hidden, and the data
    // directories' parents.
    std::vector<std::string> hidden;
    // Top-level files that are the user's symlinks to regular files
    // elsewhere, read through at the start: by the link's name.
    std::vector<std::pair<std::string, std::shared_ptr<const UserLink>>> links;
  };
  // The secret file's write-back still waiting for consent: its content
  // as written back (held entries as given) and as the jail left it.
  struct Held {
    std::string host_dir;
    std::string name;
    std::string written;
    std::string full;
    std::vector<HeldLogin> logins;
  };
  PrivateCopies() = default;
  void discard();
  // agent::write_back() into the host directory open at `host`, through
  // the user's link when the file is one (the link unchanged since the start).
  static util::Result<agent::WriteOutcome> write_back_to(int host, const Copy& c, const agent::AgentFile& file,
                                                         agent::Content given, agent::Content jail_left,
                                                         agent::Notes& notes);

  std::string run_dir_;
  std::shared_ptr<const SecretFile> secret_;
  KeepNew keep_new_;
  util::UniqueFd lock_;
  std::vector<Copy> copies_;
  std::shared_ptr<Held> held_;  // shared: PrivateCopies is moved around
};

}  // namespace pj::pi
