// What the jail is told about the requests the network filter refused,
// besides the exit summary: the status line of the 403.
#include <doctest/doctest.h>

#include "harness.h"

using namespace pj::test;

namespace {

const std::string kNoProxyEnv = "env -u NO_PROXY -u no_proxy ";

}  // namespace

TEST_CASE("a refused request's status line names the host and the option that allows it") {
  Sandbox sb;
  auto o = sb.jail({"/bin/sh", "-c",
                    kNoProxyEnv + "curl -s -D - -o /dev/null -x http://127.0.0.1:3128 http://blocked.example/; " +
                        kNoProxyEnv + "curl -s -v -p -x http://127.0.0.1:3128 https://blocked.example/ 2>&1 | " +
                        "grep '< HTTP/'"});
  CAPTURE(o.err);
  CHECK(o.out.find("HTTP/1.1 403 pi-jail refused blocked.example:80 (allow: --allow-net blocked.example:80)\r\n") !=
        std::string::npos);
  CHECK(o.out.find("< HTTP/1.1 403 pi-jail refused blocked.example:443 (allow: --allow-net blocked.example:443)") !=
        std::string::npos);
}
