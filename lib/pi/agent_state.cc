// The pure half of agent-dir write-back: which changes the jail made to
// auth.json and settings.json are data, and the host file they produce.
// The rules are read from Pi 1.4.0: core/auth-storage.js,
// core/resolve-config-value.js, pi-ai/dist/auth/oauth/*.js,
// core/settings-manager.js and core/settings-schema.d.ts.
#include "pi/agent_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>
#include <span>

#include "util/escape.h"
#include "util/json_value.h"

namespace pj::pi::agent {

namespace json = util::json;
using Kind = Notes::Kind;

// ---- Notes ----

void Notes::add(Kind kind, std::string text) {
  if (items_.size() >= kMaxNotes) {
    ++omitted_;
    return;
  }
  items_.push_back(Note{kind, std::move(text)});
}

bool Notes::any(Kind kind) const {
  for (const Note& n : items_)
    if (n.kind == kind) return true;
  return false;
}

std::vector<std::string> Notes::lines() const {
  std::vector<std::string> out;
  for (const Note& n : items_) {
    std::string_view k = n.kind == Kind::applied ? "applied" : n.kind == Kind::refused ? "refused" : "kept";
    out.push_back(fmt::format("{}: {}", k, n.text));
  }
  if (omitted_) out.push_back(fmt::format("... and {} more notes", omitted_));
  return out;
}

namespace {

// A name the jail chose, for a note: quoted, at most 64 bytes of it, and
// made unable to control a terminal (util::printable).
std::string shown(std::string_view name) {
  bool cut = name.size() > 64;
  if (cut) name = name.substr(0, 64);
  return fmt::format("\"{}{}\"", util::printable(name), cut ? "..." : "");
}

// Whether a string is safe to hand to a terminal or an HTTP header: no C0
// control character, no DEL, no C1 control (U+0080..U+009F, which some
// terminals obey like ESC). The parser already guaranteed valid UTF-8.
bool plain_text(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xA0) return false;
  }
  return true;
}

// ---- loading the three versions ----

enum class Version { host_now, given, jail_left };

std::string_view describe(Version v) {
  switch (v) {
    case Version::host_now: return "the host's";
    case Version::given: return "the copy given to the jail";
    case Version::jail_left: return "what the jail left";
  }
  return "";
}

// One version as a JSON object, or nullopt (noted) when it cannot be used.
// A missing or empty file is {} as in Pi (parseStorageData, loadFromStorage),
// except the jail's: the jail deleting the file removes nothing. Pi strips
// a UTF-8 byte order mark before JSON.parse; so does this.
std::optional<json::Value> load(std::string_view file, Version version, Content content, Notes& notes) {
  auto refuse = [&](std::string why) {
    notes.add(Kind::refused, fmt::format("{}: {} {}; nothing written back", file, describe(version), why));
    return std::nullopt;
  };
  if (!content) {
    if (version == Version::jail_left) return refuse("is missing (a removal is never applied)");
    return json::Value::object({});
  }
  std::string_view text = *content;
  if (text.size() > kMaxFileBytes) return refuse(fmt::format("is larger than {} bytes", kMaxFileBytes));
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  if (text.empty()) return json::Value::object({});
  auto parsed = json::parse(text);
  if (!parsed) return refuse(fmt::format("is not valid JSON ({})", parsed.error().what()));
  if (!parsed->as_object()) return refuse("is not a JSON object");
  return std::move(*parsed);
}

struct Versions {
  json::Value host, given, jail;
};

std::optional<Versions> load_all(std::string_view file, Content host_now, Content given, Content jail_left,
                                 Notes& notes) {
  auto jail = load(file, Version::jail_left, jail_left, notes);
  if (!jail) return std::nullopt;
  auto giv = load(file, Version::given, given, notes);
  if (!giv) return std::nullopt;
  auto host = load(file, Version::host_now, host_now, notes);
  if (!host) return std::nullopt;
  return Versions{std::move(*host), std::move(*giv), std::move(*jail)};
}

bool same(const json::Value* a, const json::Value* b) {
  if (!a || !b) return a == b;
  return *a == *b;
}

// The host's object with members replaced, added and removed; every other
// member kept as it is, in its place.
class Output {
public:
  explicit Output(const json::Object& host) : host_(host), out_(host), index_(host), removed_(host.size(), false) {}

  void set(std::string_view key, const json::Value& value) {
    if (const json::Member* m = index_.find_member(key))
      out_[static_cast<size_t>(m - host_.data())].value = value;
    else
      out_.push_back(json::Member{std::string(key), value});
    changed_ = true;
  }
  void remove(std::string_view key) {
    if (const json::Member* m = index_.find_member(key)) {
      removed_[static_cast<size_t>(m - host_.data())] = true;
      changed_ = true;
    }
  }
  NewContent result() && {
    if (!changed_) return std::nullopt;
    json::Object kept;
    for (size_t i = 0; i < out_.size(); ++i)
      if (i >= removed_.size() || !removed_[i]) kept.push_back(std::move(out_[i]));
    // As Pi writes it: JSON.stringify(data, null, 2), no newline at the end.
    return json::stringify(json::Value::object(std::move(kept)));
  }

private:
  const json::Object& host_;
  json::Object out_;
  json::KeyIndex index_;
  std::vector<bool> removed_;
  bool changed_ = false;
};

// ---- auth.json ----

// Fields of an OAuth credential that Pi's OAuth modules store as data: the
// token pair, its expiry, and identifiers and scope lists sent to the
// provider's own fixed endpoints (pi-ai auth/oauth: openai-codex accountId,
// openai-chatgpt clientId and scopes, radius scope, github-copilot
// availableModelIds). Any other field (github-copilot's enterpriseUrl
// decides the host the tokens and every prompt go to; extensions may store
// anything) must stay as given.
enum class FieldType { string, finite_number, string_array };
struct Field {
  std::string_view name;
  FieldType type;
  bool required;
};
constexpr std::array kOAuthDataFields{
    Field{"access", FieldType::string, true},         Field{"refresh", FieldType::string, true},
    Field{"expires", FieldType::finite_number, true}, Field{"accountId", FieldType::string, false},
    Field{"clientId", FieldType::string, false},      Field{"scope", FieldType::string, false},
    Field{"scopes", FieldType::string_array, false},  Field{"availableModelIds", FieldType::string_array, false},
};
// An API-key credential: only the key is data. `env` holds provider
// configuration such as Cloudflare account and gateway ids (pi-ai
// auth/types.d.ts), which decide where requests go: it must stay as given.
constexpr std::array kApiKeyDataFields{Field{"key", FieldType::string, false}};

bool has_type(const json::Value& v, FieldType t) {
  switch (t) {
    case FieldType::string: return v.as_string() && plain_text(*v.as_string());
    case FieldType::finite_number: return v.as_number() && v.as_number()->is_finite_double();
    case FieldType::string_array:
      if (!v.as_array()) return false;
      for (const json::Value& e : *v.as_array())
        if (!e.as_string() || !plain_text(*e.as_string())) return false;
      return true;
  }
  return false;
}

// Why `entry` may not be written back, or nullopt when it is data. `given`
// is the provider's entry as given to the jail (nullptr when new).
std::optional<std::string> auth_entry_refusal(const json::Value& entry, const json::Value* given) {
  const json::Object* fields = entry.as_object();
  if (!fields) return "the entry is not a JSON object";
  const json::Value* type = entry.find("type");
  const std::string* type_name = type ? type->as_string() : nullptr;
  std::span<const Field> data;
  if (type_name && *type_name == "oauth")
    data = kOAuthDataFields;
  else if (type_name && *type_name == "api_key")
    data = kApiKeyDataFields;
  else
    return "the credential type is not \"oauth\" or \"api_key\"";

  for (const Field& f : data) {
    const json::Value* v = entry.find(f.name);
    if (!v) {
      if (f.required) return fmt::format("the field \"{}\" is missing", f.name);
      continue;
    }
    if (!has_type(*v, f.type)) return fmt::format("the field \"{}\" has the wrong type", f.name);
  }
  // Fields that are not data stay as given. A credential whose type
  // changed (a new login) is compared with nothing: it may have none.
  const json::Value* given_type = given ? given->find("type") : nullptr;
  const json::Value* same_kind = given_type && *given_type == *type ? given : nullptr;
  auto is_data = [&](std::string_view name) {
    return name == "type" || std::any_of(data.begin(), data.end(), [&](const Field& f) { return f.name == name; });
  };
  for (const json::Member& m : *fields) {
    if (is_data(m.key)) continue;
    const json::Value* before = same_kind ? same_kind->find(m.key) : nullptr;
    if (!before || !(*before == m.value))
      return fmt::format("the field {} is not data and differs from what was given", shown(m.key));
  }
  if (same_kind)
    for (const json::Member& m : *same_kind->as_object())
      if (!is_data(m.key) && !entry.find(m.key))
        return fmt::format("the field {} is not data and was removed", shown(m.key));

  if (*type_name == "api_key") {
    if (const json::Value* key = entry.find("key")) {
      const std::string& k = *key->as_string();
      // resolve-config-value.js: "!cmd" runs cmd in a shell; "$NAME" and
      // "${NAME}" expand the host's environment into the key sent out.
      if (k.starts_with('!')) return std::string("the key is a shell command ('!')");
      if (k.find('$') != std::string::npos) return std::string("the key refers to environment variables ('$')");
    }
  }
  return std::nullopt;
}

}  // namespace

NewContent merge_auth(Content host_now, Content given, Content jail_left, Notes& notes, const HostDir&) {
  constexpr std::string_view file = "auth.json";
  auto v = load_all(file, host_now, given, jail_left, notes);
  if (!v) return std::nullopt;
  const json::Object& jail = *v->jail.as_object();
  json::KeyIndex given_index(*v->given.as_object());
  json::KeyIndex host_index(*v->host.as_object());
  json::KeyIndex jail_index(jail);
  Output out(*v->host.as_object());

  for (const json::Member& m : jail) {
    const json::Value* before = given_index.find(m.key);
    if (same(before, &m.value)) continue;
    std::string provider = fmt::format("{}: provider {}", file, shown(m.key));
    if (auto why = auth_entry_refusal(m.value, before)) {
      notes.add(Kind::refused, fmt::format("{}: not written back: {}", provider, *why));
      continue;
    }
    const json::Value* host = host_index.find(m.key);
    if (!same(host, before)) {
      notes.add(Kind::kept, fmt::format("{}: changed on the host during the run; the host's entry is kept", provider));
      continue;
    }
    out.set(m.key, m.value);
    notes.add(Kind::applied,
              fmt::format("{}: {} ({})", provider, before ? "updated" : "added", *m.value.find("type")->as_string()));
  }
  for (const json::Member& m : *v->given.as_object())
    if (!jail_index.find(m.key))
      notes.add(Kind::refused,
                fmt::format("{}: provider {}: removed in the jail; a removal is never applied", file, shown(m.key)));
  return std::move(out).result();
}

std::optional<std::string> hold_entries(std::string_view jail_left, Content given,
                                        const std::vector<std::string>& held) {
  std::string_view given_text = given ? *given : std::string_view();
  if (given_text.starts_with("\xEF\xBB\xBF")) given_text.remove_prefix(3);  // as load() reads it
  if (given_text.find_first_not_of(" \t\r\n") == std::string_view::npos) given_text = "{}";
  auto jail = json::parse(jail_left);
  auto before = json::parse(given_text);
  if (!jail || !jail->as_object() || !before || !before->as_object()) return std::nullopt;
  json::Object out;
  for (json::Member& m : *jail->as_object()) {
    if (std::find(held.begin(), held.end(), m.key) == held.end()) {
      out.push_back(std::move(m));
      continue;
    }
    if (const json::Value* was = before->find(m.key)) out.push_back(json::Member{m.key, *was});
  }
  return json::stringify(json::Value::object(std::move(out)));
}

bool auth_entry_is_data(std::string_view jail_left, Content given, std::string_view name) {
  Notes ignored;
  auto v = load_all("auth.json", given, given, jail_left, ignored);
  if (!v) return false;
  const json::Value* entry = v->jail.find(name);
  return entry && !auth_entry_refusal(*entry, v->given.find(name));
}

// ---- settings.json ----

namespace {

// A setting's value check. `given` is the value the jail was given for
// the same key (nullptr when absent), for nested objects whose non-data
// members must stay as given.
using Check = bool (*)(const json::Value& value, const json::Value* given);

bool one_of(const json::Value& v, std::initializer_list<std::string_view> names) {
  const std::string* s = v.as_string();
  return s && std::find(names.begin(), names.end(), *s) != names.end();
}
bool boolean(const json::Value& v, const json::Value*) { return v.as_bool() != nullptr; }
bool text(const json::Value& v, const json::Value*) { return v.as_string() && plain_text(*v.as_string()); }
bool number(const json::Value& v, const json::Value*) { return v.as_number() && v.as_number()->is_finite_double(); }
bool integer(const json::Value& v, const json::Value* g) { return number(v, g) && v.as_number()->is_integer(); }
bool number_or_disabled(const json::Value& v, const json::Value* g) { return number(v, g) || one_of(v, {"disabled"}); }
bool text_list(const json::Value& v, const json::Value*) {
  if (!v.as_array()) return false;
  for (const json::Value& e : *v.as_array())
    if (!text(e, nullptr)) return false;
  return true;
}
bool thinking_level(const json::Value& v, const json::Value*) {
  return one_of(v, {"off", "minimal", "low", "medium", "high", "xhigh", "max"});
}
bool queue_mode(const json::Value& v, const json::Value*) { return one_of(v, {"all", "one-at-a-time"}); }

struct SubField {
  std::string_view name;
  Check check;
};

// A nested object: members named in `fields` pass their check; any other
// member (not data, or unknown to Pi 1.4.0) must be exactly as given.
bool object_with(const json::Value& v, const json::Value* given, std::span<const SubField> fields) {
  const json::Object* o = v.as_object();
  if (!o) return false;
  const json::Value* given_obj = given && given->as_object() ? given : nullptr;
  for (const json::Member& m : *o) {
    auto f = std::find_if(fields.begin(), fields.end(), [&](const SubField& sf) { return sf.name == m.key; });
    if (f != fields.end()) {
      if (!f->check(m.value, given_obj ? given_obj->find(m.key) : nullptr)) return false;
      continue;
    }
    const json::Value* before = given_obj ? given_obj->find(m.key) : nullptr;
    if (!before || !(*before == m.value)) return false;
  }
  if (given_obj)
    for (const json::Member& m : *given_obj->as_object()) {
      bool listed = std::any_of(fields.begin(), fields.end(), [&](const SubField& sf) { return sf.name == m.key; });
      if (!listed && !v.find(m.key)) return false;
    }
  return true;
}

// A record (any key) whose values all pass `check`; keys are plain text.
bool record_of(const json::Value& v, Check check) {
  const json::Object* o = v.as_object();
  if (!o) return false;
  for (const json::Member& m : *o)
    if (!plain_text(m.key) || !check(m.value, nullptr)) return false;
  return true;
}

// terminal.*: how the TUI draws (settings-schema TerminalSettingsSchema).
const SubField kTerminal[] = {
    {"showImages", boolean},
    {"imageWidthCells", number},
    {"clearOnShrink", boolean},
    {"showTerminalProgress", boolean},
    {"hyperlinks", [](const json::Value& v, const json::Value*) { return v.as_bool() || one_of(v, {"auto"}); }},
    {"images",
     [](const json::Value& v, const json::Value*) {
       return (v.as_bool() && !*v.as_bool()) || one_of(v, {"kitty", "iterm2", "auto"});
     }},
    {"trueColor", [](const json::Value& v, const json::Value*) { return v.as_bool() || one_of(v, {"auto"}); }},
};
// markdown.*: codeBlockIndent is printed before every code line, so it
// must be short plain text (no ESC, no C1): a terminal escape planted here
// would run in the host's terminal.
const SubField kMarkdown[] = {
    {"codeBlockIndent",
     [](const json::Value& v, const json::Value* g) { return text(v, g) && v.as_string()->size() <= 16; }},
    {"mermaid",
     [](const json::Value& v, const json::Value*) {
       return one_of(v, {"off", "final", "streaming"});
     }},
};
// images.*: autoResize only. blockImages stays as given: turning it off
// sends images to the model, a privacy choice a jail must not make.
const SubField kImages[] = {{"autoResize", boolean}};
const SubField kOverride[] = {{"reserveTokens", integer}, {"keepRecentTokens", integer}};
const SubField kCompaction[] = {
    {"enabled", boolean},
    {"reserveTokens", integer},
    {"keepRecentTokens", integer},
    {"modelOverrides",
     [](const json::Value& v, const json::Value*) {
       return record_of(v, [](const json::Value& o, const json::Value*) { return object_with(o, nullptr, kOverride); });
     }},
};
const SubField kBranchSummary[] = {{"reserveTokens", number}, {"skipPrompt", boolean}};
const SubField kProviderRetry[] = {{"timeoutMs", number}, {"maxRetries", number}, {"maxRetryDelayMs", number}};
const SubField kRetry[] = {
    {"enabled", boolean},
    {"maxRetries", number},
    {"baseDelayMs", number},
    {"maxAgentDelayMs", number},
    {"provider", [](const json::Value& v, const json::Value* g) { return object_with(v, g, kProviderRetry); }},
    {"maxDelayMs", number},  // legacy, migrated by Pi to provider.maxRetryDelayMs
};
const SubField kThinkingBudgets[] = {{"minimal", number}, {"low", number}, {"medium", number}, {"high", number}};
const SubField kWarnings[] = {{"anthropicExtraUsage", boolean}};

// deviceId: the installation's id, a random UUID Pi makes the first time
// a login needs one (Sign in with ChatGPT sends it to OpenAI as
// ext_agent_host_id; settings-manager.js getOrCreateDeviceId) and keeps.
// It is no credential and names nothing Pi loads or runs or where
// anything goes, so one the jail made goes back when the host has none:
// else the host's next ChatGPT login announces a second installation.
// Only a UUID, which is all Pi accepts (openai-chatgpt.js agentHostId): any
// other value would break the host's next ChatGPT login. The host's own
// is never changed or removed (Change::add_only; the refusal's reason in
// kNotData).
bool uuid(const json::Value& v, const json::Value*) {
  const std::string* s = v.as_string();
  if (!s || s->size() != 36) return false;
  for (size_t i = 0; i < s->size(); ++i) {
    const char c = (*s)[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Whether the jail may change and remove a setting it writes back, or
// only add one the host lacks.
enum class Change { any, add_only };

struct Setting {
  std::string_view key;
  Check check;
  Change change = Change::any;
};

// The settings written back: display and model preferences, each checked
// against settings-schema.d.ts (Pi 1.4.0 to 1.6.0). Reasons in the comments.
const Setting kDataSettings[] = {
    // What Pi last showed and what the user picked with /model, /settings,
    // Ctrl+P and Shift+Tab. Provider and model names select among what the
    // host's own models.json and auth.json configure.
    {"lastChangelogVersion", text},
    // Pi 1.6.0: the changelog version last shown per installed extension
    // package (what is installed stays read-only in the jail; this only
    // stops the same notes from showing at every start).
    {"extensionChangelogVersions", [](const json::Value& v, const json::Value*) { return record_of(v, text); }},
    {"collapseChangelog", boolean},
    {"defaultProvider", text},
    {"defaultModel", text},
    {"defaultThinkingLevel", thinking_level},
    {"modelThinkingLevels", [](const json::Value& v, const json::Value*) { return record_of(v, thinking_level); }},
    {"enabledModels", text_list},  // model patterns cycled with Ctrl+P
    {"thinkingBudgets", [](const json::Value& v, const json::Value* g) { return object_with(v, g, kThinkingBudgets); }},
    {"transport",
     [](const json::Value& v, const json::Value*) {
       return one_of(v, {"auto", "sse", "websocket", "websocket-cached"});
     }},
    {"websockets", boolean},  // legacy spelling of transport
    {"steeringMode", queue_mode},
    {"followUpMode", queue_mode},
    {"queueMode", queue_mode},  // legacy spelling of steeringMode
    // How the TUI looks and behaves.
    {"hideThinkingBlock", boolean},
    {"theme", text},  // which theme, checked in merge_settings against the host's (theme_is_data)
    {"showCacheMissNotices", boolean},
    {"quietStartup", [](const json::Value& v, const json::Value*) { return v.as_bool() || one_of(v, {"header"}); }},
    {"doubleEscapeAction",
     [](const json::Value& v, const json::Value*) {
       return one_of(v, {"fork", "tree", "none"});
     }},
    {"treeFilterMode",
     [](const json::Value& v, const json::Value*) {
       return one_of(v, {"default", "no-tools", "user-only", "labeled-only", "all"});
     }},
    {"editorPaddingX", number},
    {"outputPad",
     [](const json::Value& v, const json::Value*) {
       const json::Number* n = v.as_number();
       return n && (*n == json::Number::from_int(0) || *n == json::Number::from_int(1));
     }},
    {"autocompleteMaxVisible", number},
    {"showHardwareCursor", boolean},
    {"tuiMode",
     [](const json::Value& v, const json::Value*) {
       return one_of(v, {"regular", "fullscreen"});
     }},
    {"fullscreenExitOutput",
     [](const json::Value& v, const json::Value*) {
       return one_of(v, {"transcript", "resume-hint"});
     }},
    {"fullscreenScrollbar",
     [](const json::Value& v, const json::Value*) {
       return one_of(v, {"auto", "always", "hidden"});
     }},
    {"fullscreenCopyOnSelect", boolean},
    {"fullscreenWheelScrollLines",
     [](const json::Value& v, const json::Value* g) { return number(v, g) || one_of(v, {"auto"}); }},
    {"terminal", [](const json::Value& v, const json::Value* g) { return object_with(v, g, kTerminal); }},
    {"markdown", [](const json::Value& v, const json::Value* g) { return object_with(v, g, kMarkdown); }},
    {"images", [](const json::Value& v, const json::Value* g) { return object_with(v, g, kImages); }},
    {"warnings", [](const json::Value& v, const json::Value* g) { return object_with(v, g, kWarnings); }},
    // When Pi compacts, retries and times out: numbers and switches.
    {"compaction", [](const json::Value& v, const json::Value* g) { return object_with(v, g, kCompaction); }},
    {"branchSummary", [](const json::Value& v, const json::Value* g) { return object_with(v, g, kBranchSummary); }},
    {"retry", [](const json::Value& v, const json::Value* g) { return object_with(v, g, kRetry); }},
    {"httpIdleTimeoutMs", number_or_disabled},
    {"websocketConnectTimeoutMs", number_or_disabled},
    // The installation's id, added when the host has none (uuid above).
    {"deviceId", uuid, Change::add_only},
};

struct NotData {
  std::string_view key;
  std::string_view why;
};

// Settings Pi stores that are never written back, and why (PI-NOTES.md;
// settings-manager.js). Any key on neither list is refused too.
const NotData kNotData[] = {
    {"shellPath", "it names the shell Pi runs commands with"},
    {"shellCommandPrefix", "it is prepended to every command the bash tool runs"},
    {"npmCommand", "it is the command Pi runs to install packages"},
    {"selfUpdateCommand", "it is the command Pi runs to update itself"},
    {"externalEditor", "it is a command Pi runs"},
    {"packages", "it lists packages whose code Pi loads"},
    {"extensions", "it lists extension code Pi loads"},
    {"skills", "it lists skills Pi loads into the model's instructions"},
    {"prompts", "it lists prompt templates Pi loads"},
    {"themes", "it lists theme files Pi loads"},
    {"httpProxy", "it decides where all of Pi's traffic goes"},
    {"sessionDir", "it decides where sessions are written"},
    {"sessionShareDestination", "it decides where shared sessions are uploaded"},
    {"defaultProjectTrust", "\"always\" would trust every project's extensions and settings"},
    {"enableSkillCommands", "it turns skills into commands"},
    {"defaultTools", "it decides which tools Pi enables"},
    {"codemode", "it lets the model run code"},
    {"cacheWarming", "it spends money (Pi reads it from global settings only, for that reason)"},
    {"enableInstallTelemetry", "it is a privacy choice"},
    {"enableAnalytics", "it is a privacy choice"},
    {"trackingId", "it is an identity"},
    {"deviceId", "it is this installation's identity: a jail may add one the host lacks, never change or remove it"},
    {"$schema", "it is a URL that editors fetch"},
};

// A theme Pi finds without loading a file from elsewhere: built into the
// Pi releases tested (dist/modes/interactive/theme/{dark,light}.json of
// 1.4.0 and 1.6.0), or "<name>.json" in the host's themes/, which the
// jail sees read-only. Pi joins any other name to that directory's path,
// so "../x" would load a file of the jail's choosing.
bool known_theme(std::string_view name, const HostDir& dir) {
  if (name == "dark" || name == "light") return true;
  return std::find(dir.themes.begin(), dir.themes.end(), name) != dir.themes.end();
}

// "NAME", or Pi 1.6.0's "LIGHT/DARK" pair (theme.js parseAutoThemeSetting).
bool theme_is_data(const json::Value& v, const HostDir& dir) {
  const std::string* s = v.as_string();
  if (!s) return false;
  const size_t slash = s->find('/');
  if (slash == std::string::npos) return known_theme(*s, dir);
  std::string_view light = std::string_view(*s).substr(0, slash), dark = std::string_view(*s).substr(slash + 1);
  return known_theme(light, dir) && known_theme(dark, dir);
}

const Setting* data_setting(std::string_view key) {
  for (const Setting& s : kDataSettings)
    if (s.key == key) return &s;
  return nullptr;
}

std::string_view not_data_reason(std::string_view key) {
  for (const NotData& n : kNotData)
    if (n.key == key) return n.why;
  return "it is not a setting Pi 1.4.0 to 1.6.0 stores as data";
}

}  // namespace

NewContent merge_settings(Content host_now, Content given, Content jail_left, Notes& notes, const HostDir& dir) {
  constexpr std::string_view file = "settings.json";
  auto v = load_all(file, host_now, given, jail_left, notes);
  if (!v) return std::nullopt;
  const json::Object& jail = *v->jail.as_object();
  json::KeyIndex given_index(*v->given.as_object());
  json::KeyIndex host_index(*v->host.as_object());
  json::KeyIndex jail_index(jail);
  Output out(*v->host.as_object());

  for (const json::Member& m : jail) {
    const json::Value* before = given_index.find(m.key);
    if (same(before, &m.value)) continue;
    std::string name = fmt::format("{}: {}", file, shown(m.key));
    const Setting* rule = data_setting(m.key);
    if (rule && rule->change == Change::add_only && before) rule = nullptr;  // changed: refused as not data
    if (m.key == "theme" && !theme_is_data(m.value, dir)) {
      notes.add(Kind::refused, fmt::format("{}: not written back: it names a theme neither built into Pi nor in the "
                                           "agent dir's themes/, which Pi would load from elsewhere",
                                           name));
      continue;
    }
    if (!rule) {
      notes.add(Kind::refused, fmt::format("{}: not written back: {}", name, not_data_reason(m.key)));
      continue;
    }
    if (!rule->check(m.value, before)) {
      notes.add(Kind::refused, fmt::format("{}: not written back: the value is not what Pi stores there", name));
      continue;
    }
    const json::Value* host = host_index.find(m.key);
    if (!same(host, before)) {
      notes.add(Kind::kept, fmt::format("{}: changed on the host during the run; the host's value is kept", name));
      continue;
    }
    out.set(m.key, m.value);
    notes.add(Kind::applied, fmt::format("{}: {}", name, before ? "changed" : "set"));
  }
  for (const json::Member& m : *v->given.as_object()) {
    if (jail_index.find(m.key)) continue;
    std::string name = fmt::format("{}: {}", file, shown(m.key));
    const Setting* rule = data_setting(m.key);
    if (!rule || rule->change == Change::add_only) {
      notes.add(Kind::refused, fmt::format("{}: removed in the jail; not applied: {}", name, not_data_reason(m.key)));
    } else if (!same(host_index.find(m.key), &m.value)) {
      notes.add(Kind::kept, fmt::format("{}: changed on the host during the run; the host's value is kept", name));
    } else {
      out.remove(m.key);
      notes.add(Kind::applied, fmt::format("{}: removed (Pi's default applies)", name));
    }
  }
  return std::move(out).result();
}

}  // namespace pj::pi::agent
