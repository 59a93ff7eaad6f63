// tools/doctor/debian_packages.hpp - the Debian packages that own files, and their upstream
// versions (debian_packages.cpp).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hugepage::doctor {

/// The Debian packages that own `paths` (as dpkg lists them; /usr-merged paths also match their
/// /lib spelling) in the dpkg database under `root`: path -> {package, version}. Missing paths
/// are left out; an unreadable database gives an empty map.
std::map<std::string, std::pair<std::string, std::string>> debian_packages(
    const std::string& root, const std::vector<std::string>& paths);

/// The upstream part of a Debian version: "5:7.0.15-1~deb12u10" -> "7.0.15",
/// "2.0.9+ds-2" -> "2.0.9", "17.0.15+6-1~deb12u1" -> "17.0.15+6".
std::string upstream_version(std::string_view debian_version);

}  // namespace hugepage::doctor
