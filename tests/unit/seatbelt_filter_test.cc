// The network filter's own Seatbelt profile (seatbelt/filter_profile.h),
// as text: what it allows and what it leaves denied. Runs everywhere; it
// cannot show what macOS enforces, which only a Mac can.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "seatbelt/filter_profile.h"
#include "seatbelt/sbpl.h"
#include "seatbelt_rules.h"

using namespace pj;
using namespace pj::seatbelt;
using pj::test::sbpl_rules;
using Rules = pj::test::SbplRules;

namespace {

FilterPlanInput filter_input() {
  FilterPlanInput in;
  in.exe = "/opt/homebrew/Cellar/pi-jail/0.1.0/bin/pi-jail";
  in.args = {"--network-filter"};
  in.libraries = {"/opt/homebrew/opt/openssl@3/lib/libssl.3.dylib", "/opt/homebrew/opt/openssl@3/lib/libcrypto.3.dylib",
                  "/usr/lib/libSystem.B.dylib", "relative/lib.dylib"};
  in.http_port = 50001;
  in.socks_port = 50002;
  in.outbound_ports = {443, 80, 443, 5432};
  return in;
}

std::map<std::string, std::string> params_of(const SeatbeltSpec& s) {
  std::map<std::string, std::string> out;
  for (const auto& p : s.params) out[p.name] = p.value;
  return out;
}

}  // namespace

TEST_CASE(
    "Seatbelt filter: denied by default, it may load itself, accept on its listeners, connect to the rules' ports") {
  auto spec = plan_filter(filter_input());
  REQUIRE_MESSAGE(spec.ok(), spec.error().message());
  CHECK(spec->profile.starts_with(std::string(filter_base_profile())));
  std::vector<std::string> names;
  for (const auto& p : spec->params) names.push_back(p.name);
  CHECK(check_profile(spec->profile, names).ok());
  Rules r = sbpl_rules(spec->profile);
  CHECK(r.denied == std::vector<std::string>{"deny default"});
  // Exactly these operations, nothing else (no file-write*, process-fork,
  // mach-lookup, ipc, file-ioctl, default).
  std::set<std::string> ops;
  for (const auto& [op, filters] : r.allowed) ops.insert(op);
  CHECK(ops == std::set<std::string>{"file-read*", "network-inbound", "network-outbound", "process-exec", "signal",
                                     "sysctl-read"});
  for (const auto& rule : r.allowed) {
    CAPTURE(rule.first);
    CHECK(std::find(rule.second.begin(), rule.second.end(), "") == rule.second.end());  // never unconditioned
  }
  // Exec: only of itself (sandbox-exec's exec of the filter).
  CHECK(r.allowed["process-exec"] == std::vector<std::string>{"literal FILTER_EXE"});
  // Reads: its executable, its libraries (absolute ones, each by its path)
  // and the loader's shared cache; no directory of the user's, no /etc.
  std::set<std::string> reads(r.allowed["file-read*"].begin(), r.allowed["file-read*"].end());
  CHECK(reads == std::set<std::string>{"literal FILTER_EXE", "literal LIBRARY_0", "literal LIBRARY_1",
                                       "literal LIBRARY_2", "literal /usr/lib/dyld", "subpath /System/Library/dyld",
                                       "subpath /System/Volumes/Preboot/Cryptexes/OS/System/Library/dyld",
                                       "subpath /private/var/db/dyld"});
  CHECK(r.allowed["signal"] == std::vector<std::string>{"target self"});
  CHECK(r.allowed["network-inbound"] == std::vector<std::string>{"local tcp PROXY_HTTP", "local tcp PROXY_SOCKS"});
  CHECK(r.allowed["network-outbound"] ==
        std::vector<std::string>{"remote tcp OUTBOUND_0", "remote tcp OUTBOUND_1", "remote tcp OUTBOUND_2"});
  auto p = params_of(*spec);
  CHECK(p["FILTER_EXE"] == "/opt/homebrew/Cellar/pi-jail/0.1.0/bin/pi-jail");
  CHECK(p["PROXY_HTTP"] == "localhost:50001");
  CHECK(p["PROXY_SOCKS"] == "localhost:50002");
  CHECK(p["OUTBOUND_0"] == "*:80");
  CHECK(p["OUTBOUND_1"] == "*:443");
  CHECK(p["OUTBOUND_2"] == "*:5432");
  CHECK(p["LIBRARY_0"] == "/opt/homebrew/opt/openssl@3/lib/libcrypto.3.dylib");
  CHECK(p.count("LIBRARY_3") == 0);  // the relative name is left out
  CHECK(spec->params.size() == 9);
  // The command: the executable with --network-filter, no environment.
  CHECK(spec->exec_path == "/opt/homebrew/Cellar/pi-jail/0.1.0/bin/pi-jail");
  CHECK(spec->argv == std::vector<std::string>{spec->exec_path, "--network-filter"});
  CHECK(spec->env.empty());
  auto args = sandbox_exec_args(*spec, "/usr/bin/sandbox-exec");
  CHECK(std::vector<std::string>(args.end() - 3, args.end()) ==
        std::vector<std::string>{"--", spec->exec_path, "--network-filter"});
}

TEST_CASE("Seatbelt filter: rules that allow nothing leave it no outbound connection at all") {
  FilterPlanInput in = filter_input();
  in.outbound_ports.clear();
  in.libraries.clear();
  auto spec = plan_filter(in);
  REQUIRE(spec.ok());
  Rules r = sbpl_rules(spec->profile);
  CHECK(r.allowed.count("network-outbound") == 0);
  CHECK(spec->profile.find("OUTBOUND") == std::string::npos);
  CHECK(spec->profile.find("LIBRARY") == std::string::npos);
  CHECK(spec->params.size() == 3);
}

TEST_CASE("Seatbelt filter: paths reach the profile only as parameters; the same shape gives the same text") {
  FilterPlanInput plain = filter_input(), odd = filter_input();
  odd.exe = "/Users/a\"b (allow default)\n(allow file-write* (subpath \"/\")) ;/pi-jail";
  odd.libraries = {"/x\")) (allow process-fork) ;.dylib", "/y.dylib", "/z.dylib"};
  auto a = plan_filter(plain), b = plan_filter(odd);
  REQUIRE(a.ok());
  REQUIRE_MESSAGE(b.ok(), b.error().message());
  CHECK(a->profile == b->profile);
  CHECK(b->profile.find("allow default") == std::string::npos);
  CHECK(params_of(*b)["FILTER_EXE"] == odd.exe);
}

TEST_CASE("Seatbelt filter: a relative executable and ports out of range are refused, all at once") {
  FilterPlanInput in = filter_input();
  in.exe = "pi-jail";
  in.socks_port = 0;
  in.outbound_ports.push_back(70000);
  auto spec = plan_filter(in);
  REQUIRE_FALSE(spec.ok());
  const std::string m = spec.error().message();
  CHECK(m.find("the filter's executable 'pi-jail' is not an absolute path") != std::string::npos);
  CHECK(m.find("the filter's listener port 0 is out of range") != std::string::npos);
  CHECK(m.find("the outbound port 70000 is out of range") != std::string::npos);
}

TEST_CASE("Seatbelt checker: inbound and self-signal rules take parameters and nothing wider") {
  auto refused = [](std::string_view text, std::vector<std::string> params = {}) {
    auto st = check_profile(text, params);
    return st.ok() ? std::string() : st.error().message();
  };
  const std::string head = "(version 1)\n(deny default)\n";
  CHECK(refused(head + "(allow network-inbound (local tcp (param \"P\")))", {"P"}).empty());
  CHECK(refused(head + "(allow signal (target self))").empty());
  CHECK(refused(head + "(allow network-inbound (local tcp \"*:*\"))").find("local tcp takes (param") !=
        std::string::npos);
  CHECK(refused(head + "(allow network-inbound (local udp (param \"P\")))", {"P"}).find("local: only tcp") !=
        std::string::npos);
  CHECK(refused(head + "(allow signal (target others))").find("only same-sandbox or self") != std::string::npos);
}
