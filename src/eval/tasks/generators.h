#pragma once
// One generator per task family, one file each (ruler_niah.cpp, variable_tracking.cpp,
// common_words.cpp, freq_words.cpp, qa.cpp, needle_haystack.cpp). Each writes the
// reference script's templates byte for byte and builds a sample as a pure function of
// the sample's seed and its haystack size, so fit_prompt can size it to the length.
//
// Randomness follows the reference scripts' structure, not their exact numbers (Python's
// generator and NLTK's sentence splitter are not reproduced): what RULER draws from the
// global generator is drawn from the sample's seed, and what it shuffles with a fresh
// random.Random(random_seed) (needle order, CWE and FWE word order, QA documents) is
// shuffled with a fresh generator seeded with the run's seed, so that pattern repeats
// across samples as it does in RULER.
#include <cstdint>
#include <string>
#include <vector>

#include "eval/tasks/prompt_builder.h"
#include "eval/tasks/qa_datasets.h"
#include "eval/tasks/task_data.h"

namespace deferkv::eval {

struct GeneratorContext {
  const PromptBuilder& prompt;
  const TaskData& data;
  uint64_t run_seed;
  int64_t questions_per_context = 1;
};

// A sample's text, ids and answers; the caller adds task, length and index.
struct GeneratedPrompt {
  std::string prompt;
  std::vector<int32_t> tokens;
  std::vector<std::string> references;
  int64_t context_tokens = 0;  // tokens[0, context_tokens): up to the end of the template's context
  std::vector<TaskTurn> turns;  // questions_per_context > 1: every question, the first included
};

// RULER niah.py: the haystack and what the needles' keys and values are.
enum class Haystack { kNoise, kEssay, kNeedle };
enum class NeedleKind { kWords, kNumbers, kUuids };
struct NiahConfig {
  Haystack haystack;
  NeedleKind keys, values;
  int num_keys, num_values, num_queries;
};

// `budget`: tokens the prompt may take (the length less the tokens to generate).
GeneratedPrompt generate_ruler_niah(const GeneratorContext& ctx, const NiahConfig& config, int64_t budget,
                                    uint64_t seed);
// variable_tracking.py with its one in-context example (a 500-token chain with the answer).
GeneratedPrompt generate_variable_tracking(const GeneratorContext& ctx, int num_chains, int num_hops,
                                           int64_t budget, uint64_t seed);
// common_words_extraction.py; `length` (prompt plus generation) picks the small-length
// settings below 4096 tokens.
struct CweConfig {
  int freq_common, freq_uncommon, num_common;
};
GeneratedPrompt generate_common_words(const GeneratorContext& ctx, const CweConfig& config, int64_t length,
                                      int64_t budget, uint64_t seed);
// freq_words_extraction.py: a Zipf(alpha) text over (length - generation) / 50 coded words.
GeneratedPrompt generate_freq_words(const GeneratorContext& ctx, double alpha, int64_t budget, uint64_t seed);
// qa.py: question `index` of the dataset with its gold documents among distractors.
GeneratedPrompt generate_qa(const GeneratorContext& ctx, const QaDataset& dataset, std::string_view task,
                            int64_t index, int64_t budget, uint64_t seed);

// Needle-in-a-Haystack (KVCache-Factory's run_needle_in_haystack.py after gkamradt): the
// essays cut to a number of tokens, the needle put at depth_percent of them and moved back
// to just after a period token, inside the "story book" prompt.
class NeedleHaystack {
 public:
  explicit NeedleHaystack(const GeneratorContext& ctx);
  GeneratedPrompt generate(int64_t budget, double depth_percent) const;

 private:
  // The essays' ids, repeated until there are at least n.
  const std::vector<int32_t>& haystack_tokens(int64_t n) const;

  const GeneratorContext& ctx_;
  std::vector<int32_t> needle_tokens_;
  std::vector<bool> is_period_;  // by token id: the token is "." or " ."
  mutable std::vector<int32_t> haystack_;
  mutable int64_t haystack_repeats_ = 0;
};

}  // namespace deferkv::eval
