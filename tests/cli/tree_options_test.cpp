// The draft tree options (cli/speculative_tokens.h): --spec-tree-top-k / -depth / -tokens into
// SpecOptions::tree with their defaults, --spec-tree-shape, bench-accept's TOP_K:DEPTH:TOKENS entries, and what
// they refuse.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/options.h"
#include "cli/speculative_tokens.h"
#include "core/error.h"

namespace aerie::cli {
namespace {

SpecOptions applied(const std::vector<std::string>& argv) {
  const Args args = parse_options(Command::kGenerate, argv);
  SpecOptions spec;
  apply_tree_options(args, spec);
  return spec;
}

TEST(TreeOptions, TopKTurnsTreesOnWithDefaults) {
  EXPECT_FALSE(applied({}).tree.enabled());
  const DraftTreeShape shape = applied({"--spec-tree-top-k", "4"}).tree;
  EXPECT_EQ(shape.top_k, 4);
  EXPECT_EQ(shape.depth, 5);
  EXPECT_EQ(shape.total_tokens, 8);
  const DraftTreeShape given = applied({"--spec-tree-top-k", "2", "--spec-tree-depth", "3", "--spec-tree-tokens", "6"}).tree;
  EXPECT_EQ(given.top_k, 2);
  EXPECT_EQ(given.depth, 3);
  EXPECT_EQ(given.total_tokens, 6);
}

TEST(TreeOptions, RefusesShapesOutOfRangeAndDepthWithoutTopK) {
  EXPECT_THROW(applied({"--spec-tree-depth", "3"}), Error);
  EXPECT_THROW(applied({"--spec-tree-top-k", "0"}), Error);
  EXPECT_THROW(applied({"--spec-tree-top-k", "17"}), Error);
  EXPECT_THROW(applied({"--spec-tree-top-k", "2", "--spec-tree-tokens", "65"}), Error);
  EXPECT_THROW(applied({"--spec-tree-top-k", "2", "--spec-tree-depth", "0"}), Error);
}

TEST(TreeOptions, ShapeIsLearnedUnlessConfidenceIsAskedFor) {
  EXPECT_EQ(applied({"--spec-tree-top-k", "2"}).tree.score, TreeScore::kLearned);
  EXPECT_EQ(applied({"--spec-tree-top-k", "2", "--spec-tree-shape", "confidence"}).tree.score, TreeScore::kConfidence);
  EXPECT_EQ(applied({"--spec-tree-top-k", "2", "--spec-tree-shape", "learned"}).tree.score, TreeScore::kLearned);
  EXPECT_THROW(applied({"--spec-tree-shape", "confidence"}), Error);  // needs --spec-tree-top-k
  EXPECT_THROW(applied({"--spec-tree-top-k", "2", "--spec-tree-shape", "eagle"}), Error);
  EXPECT_EQ(tree_score(parse_options(Command::kBenchAccept, {"--spec-tree-shape", "confidence"})), TreeScore::kConfidence);
}

TEST(TreeOptions, BenchAcceptEntries) {
  const DraftTreeShape shape = parse_tree_shape("2:4:4");
  EXPECT_EQ(shape.top_k, 2);
  EXPECT_EQ(shape.depth, 4);
  EXPECT_EQ(shape.total_tokens, 4);
  for (const char* bad : {"2:4", "2:4:4x", "0:4:4", "a:b:c", "2:4:100"}) EXPECT_THROW(parse_tree_shape(bad), Error) << bad;
}

}  // namespace
}  // namespace aerie::cli
