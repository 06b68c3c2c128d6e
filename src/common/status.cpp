#include "flashmsa/status.h"

namespace flashmsa {

Status Status::InvalidArgument(const std::string& op, const std::string& arg,
                               const std::string& expected, const std::string& actual) {
  return Status(StatusCode::kInvalidArgument, "flashmsa::" + op + ": argument '" + arg +
                                                  "': expected " + expected + ", got " + actual);
}

Status Status::Unsupported(const std::string& op, const std::string& what,
                           const std::string& detail) {
  return Status(StatusCode::kUnsupported,
                "flashmsa::" + op + ": " + what + " is not supported: " + detail);
}

Status Status::Internal(const std::string& op, const std::string& detail) {
  return Status(StatusCode::kInternal, "flashmsa::" + op + ": internal error: " + detail);
}

}  // namespace flashmsa
