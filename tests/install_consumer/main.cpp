// Uses the installed library: quantise one value and reject a bad argument.
#include <cstdio>

#include <flashmsa/flashmsa.h>

int main() {
  if (flashmsa::float_to_e4m3_sat(1000.0f) != 0x7e) return 1;
  flashmsa::TensorView none;
  flashmsa::Status s = flashmsa::quantize_query_e4m3(none, 1.0f, none);
  if (s.ok()) return 2;
  std::printf("flashmsa %s: %s\n", flashmsa::version(), s.message().c_str());
  return 0;
}
