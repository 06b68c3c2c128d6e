// DecodePlanCache (attention.h): one plan object per key, errors not cached.
#include <gtest/gtest.h>

#include "flashmsa/attention.h"

namespace flashmsa {
namespace {

DecodePlanArgs args(int batch, int q) {
  DecodePlanArgs a;
  a.batch_size = batch;
  a.queries_per_request = q;
  a.num_q_heads = 16;
  a.num_kv_heads = 1;
  a.max_pages_per_request = 64;
  return a;
}

TEST(DecodePlanCache, SameKeySamePlanOtherKeyOtherPlan) {
  DecodePlanCache cache;
  SparseDecodePlan* a = nullptr;
  SparseDecodePlan* b = nullptr;
  SparseDecodePlan* c = nullptr;
  ASSERT_TRUE(cache.get(args(4, 8), &a).ok());
  ASSERT_TRUE(cache.get(args(4, 8), &b).ok());
  ASSERT_TRUE(cache.get(args(4, 2), &c).ok());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_TRUE(a->planned());
  EXPECT_EQ(a->args().queries_per_request, 8);
  EXPECT_EQ(c->args().queries_per_request, 2);
  EXPECT_EQ(cache.size(), 2u);
  DecodePlanArgs fp8 = args(4, 8);
  fp8.kv_format = KvFormat::fp8;
  fp8.q_dtype = DType::e4m3;
  ASSERT_TRUE(cache.get(fp8, &b).ok());
  EXPECT_NE(a, b);
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
}

TEST(DecodePlanCache, InvalidArgumentsAreReportedAndNotCached) {
  DecodePlanCache cache;
  SparseDecodePlan* p = nullptr;
  Status s = cache.get(args(4, 33), &p);  // Q > 32 (D10)
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("queries_per_request"), std::string::npos) << s.message();
  EXPECT_EQ(cache.size(), 0u);
  s = cache.get(args(4, 8), nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'plan'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace flashmsa
