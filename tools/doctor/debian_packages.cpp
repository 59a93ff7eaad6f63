// tools/doctor/debian_packages.cpp - which Debian package, at which version, owns a file.
#include "debian_packages.hpp"

#include <dirent.h>

#include "read_text.hpp"

namespace hugepage::doctor {

std::string upstream_version(std::string_view v) {
  if (const auto colon = v.find(':'); colon != std::string_view::npos) v.remove_prefix(colon + 1);
  if (const auto dash = v.rfind('-'); dash != std::string_view::npos) v = v.substr(0, dash);
  for (const std::string_view repack : {"+ds", "+dfsg", "~ds", "~dfsg"}) {
    if (const auto at = v.find(repack); at != std::string_view::npos) v = v.substr(0, at);
  }
  return std::string(v);
}

std::map<std::string, std::pair<std::string, std::string>> debian_packages(
    const std::string& root, const std::vector<std::string>& paths) {
  std::map<std::string, std::pair<std::string, std::string>> found;
  // Debian 12 is /usr-merged but dpkg still lists many files under /lib.
  std::vector<std::pair<std::string, std::string>> wanted;  // spelling in dpkg, path asked
  for (const std::string& path : paths) {
    wanted.emplace_back(path, path);
    if (path.rfind("/usr/lib/", 0) == 0) wanted.emplace_back(path.substr(4), path);
  }
  const std::string info = root + "/var/lib/dpkg/info";
  DIR* d = ::opendir(info.c_str());
  if (d == nullptr) return found;
  std::map<std::string, std::string> owner;  // path asked -> package
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name.size() < 6 || name.substr(name.size() - 5) != ".list") continue;
    const auto text = read_text(info + "/", std::string(name));
    if (!text) continue;
    for (const auto& [spelling, path] : wanted) {
      if (owner.count(path) != 0) continue;
      const auto at = text->find(spelling + "\n");
      if (at != std::string::npos && (at == 0 || (*text)[at - 1] == '\n')) {
        std::string package(name.substr(0, name.size() - 5));
        package = package.substr(0, package.find(':'));
        owner[path] = package;
      }
    }
    if (owner.size() == paths.size()) break;
  }
  ::closedir(d);
  if (owner.empty()) return found;
  const auto status = read_text(root, "/var/lib/dpkg/status");
  if (!status) return found;
  for (const auto& [path, package] : owner) {
    const auto at = status->find("Package: " + package + "\n");
    if (at != 0 && (at == std::string::npos || (*status)[at - 1] != '\n')) continue;
    const auto end = status->find("\n\n", at);
    const std::string stanza = status->substr(at, end == std::string::npos ? end : end - at);
    const auto v = stanza.find("\nVersion: ");
    if (v == std::string::npos) continue;
    found[path] = {package, stanza.substr(v + 10, stanza.find('\n', v + 10) - v - 10)};
  }
  return found;
}

}  // namespace hugepage::doctor
