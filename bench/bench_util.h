// Small helpers shared by the benchmark programs.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace flashmsa::bench {

/// Splits a comma-separated option value ("a,b,c") into its items.
inline std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

}  // namespace flashmsa::bench
