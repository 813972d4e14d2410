#include "seatbelt/filter_profile.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "seatbelt/sbpl.h"

namespace pj::seatbelt {

using util::Error;

namespace {

bool valid_port(int port) { return port > 0 && port <= 65535; }

// One (allow OPERATION ...) rule of one filter per value, each value a
// parameter PREFIX_N; nothing when there is none.
void add_rule(SeatbeltSpec& spec, std::string_view operation, std::string_view filter, std::string_view prefix,
              const std::vector<std::string>& values, std::string_view why) {
  if (values.empty()) return;
  spec.profile += fmt::format("(allow {}", operation);
  for (size_t i = 0; i < values.size(); ++i) {
    std::string name = fmt::format("{}_{}", prefix, i);
    spec.profile += fmt::format("\n  ({} (param \"{}\"))", filter, name);
    spec.params.push_back({name, values[i], std::string(why)});
  }
  spec.profile += ")\n";
}

}  // namespace

util::Result<SeatbeltSpec> plan_filter(const FilterPlanInput& in) {
  std::vector<std::string> problems;
  if (in.exe.empty() || in.exe.front() != '/')
    problems.push_back(fmt::format("the filter's executable '{}' is not an absolute path", in.exe));
  for (int port : {in.http_port, in.socks_port})
    if (!valid_port(port)) problems.push_back(fmt::format("the filter's listener port {} is out of range", port));
  for (int port : in.outbound_ports)
    if (!valid_port(port)) problems.push_back(fmt::format("the outbound port {} is out of range", port));
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
    return Error::invalid("the network filter's Seatbelt profile: " + all);
  }
  SeatbeltSpec spec;
  spec.profile = std::string(filter_base_profile());
  spec.params.push_back({"FILTER_EXE", in.exe, "the filter's executable (pi-jail itself)"});
  spec.params.push_back({"PROXY_HTTP", fmt::format("localhost:{}", in.http_port), "the HTTP proxy's listener"});
  spec.params.push_back({"PROXY_SOCKS", fmt::format("localhost:{}", in.socks_port), "the SOCKS5 proxy's listener"});
  std::set<std::string> libraries;
  for (const auto& l : in.libraries)
    if (!l.empty() && l.front() == '/' && l != in.exe) libraries.insert(l);
  add_rule(spec, "file-read*", "literal", "LIBRARY", {libraries.begin(), libraries.end()}, "a library the loader maps");
  std::set<int> ports(in.outbound_ports.begin(), in.outbound_ports.end());
  std::vector<std::string> outbound;
  for (int port : ports) outbound.push_back(fmt::format("*:{}", port));
  add_rule(spec, "network-outbound", "remote tcp", "OUTBOUND", outbound, "a port the network rules allow");
  std::vector<std::string> names;
  for (const auto& p : spec.params) names.push_back(p.name);
  if (auto st = check_profile(spec.profile, names); !st)
    return std::move(st.take_error()).context("the network filter's Seatbelt profile");
  spec.exec_path = in.exe;
  spec.argv.push_back(in.exe);
  spec.argv.insert(spec.argv.end(), in.args.begin(), in.args.end());
  return spec;
}

}  // namespace pj::seatbelt
