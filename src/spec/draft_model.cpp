#include "spec/draft_model.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "io/weight_store.h"
#include "models/registry.h"
#include "spec/head_names.h"

namespace aerie {

DraftModel::DraftModel(std::unique_ptr<Model> model, std::string source)
    : model_(std::move(model)), source_(std::move(source)) {}

std::string DraftModel::describe() const { return str_cat("draft model ", source_, ": ", model_->describe()); }

KvCache DraftModel::make_kv_cache(int64_t capacity, KvDType dtype) const {
  // One position beyond the head's: the forward writes the previous token's row before truncating.
  return model_->make_kv_cache(capacity + 1, dtype);
}

DraftOutput DraftModel::forward(const DraftBatch& batch) {
  const size_t n_seqs = batch.sequences.size();
  AERIE_CHECK(batch.prev_token_ids.size() == n_seqs, "draft model: ", batch.prev_token_ids.size(),
              " previous tokens for ", n_seqs, " sequences");
  // Each sequence's rows gain its previous token in front: head row r of sequence s is model row r + s + 1.
  ids_.clear();
  rows_.clear();
  for (size_t s = 0; s < n_seqs; ++s) {
    const SequenceRows& h = batch.sequences[s];
    rows_.push_back(SequenceRows{int64_t(ids_.size()), h.n_rows + 1, h.kv});
    ids_.push_back(batch.prev_token_ids[s]);
    for (int64_t r = 0; r < h.n_rows; ++r) ids_.push_back(batch.token_ids[size_t(h.row_begin + r)]);
  }
  logit_rows_.clear();
  size_t s = 0;
  for (int64_t r : batch.logit_rows) {
    while (s < n_seqs && r >= batch.sequences[s].row_begin + batch.sequences[s].n_rows) ++s;
    AERIE_CHECK(s < n_seqs && r >= batch.sequences[s].row_begin, "draft model: logit row ", r,
                " is in no sequence's rows");
    logit_rows_.push_back(r + int64_t(s) + 1);
  }
  const ForwardOutput out = model_->forward(StepBatch{ids_, rows_, logit_rows_, {}});
  // The last token's row is re-run by the next forward (see the header): the cache keeps the head's length.
  for (const SequenceRows& r : rows_) r.kv->truncate(r.kv->length() - 1, /*keep_blocks=*/true);
  zero_features_.assign(batch.token_ids.size(), 0.0f);
  return DraftOutput{out.logits, out.n_logit_rows, out.n_vocab, zero_features_.data(), 1};
}

bool is_draft_model_folder(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(dir / "config.json", ec)) return false;
  const nlohmann::json json = read_json_file(dir / "config.json");
  if (!json.is_object() || !json.contains("architectures") || !json["architectures"].is_array() ||
      json["architectures"].empty() || !json["architectures"][0].is_string())
    return false;
  const std::string arch = json["architectures"][0].get<std::string>();
  if (arch != "LlamaForCausalLM" && arch != "DeepseekV3ForCausalLM") return false;
  // EAGLE-1 heads share LlamaForCausalLM: a full model has model.layers.0.* and no fc.
  const WeightStore store = WeightStore::open_dir(dir);
  return store.contains("model.layers.0.input_layernorm.weight") && !store.contains("fc.weight") &&
         !store.contains("model.fc.weight") && !has_eagle3_tensors(store);
}

namespace {

std::string ids_str(const std::vector<int64_t>& ids) {
  std::string s = "[";
  for (int64_t id : ids) s += str_cat(s.size() > 1 ? ", " : "", id);
  return s + "]";
}

// Both folders' tokenizer.json agree on the vocabulary, merges and added tokens (other sections, such as
// truncation or padding, do not change the ids).
void check_same_tokenizer(const std::filesystem::path& draft_dir, const std::filesystem::path& target_dir) {
  std::error_code ec;
  const std::filesystem::path d = draft_dir / "tokenizer.json", t = target_dir / "tokenizer.json";
  const bool has_d = std::filesystem::is_regular_file(d, ec), has_t = std::filesystem::is_regular_file(t, ec);
  if (!has_d && !has_t) return;  // nothing to compare beyond the vocabulary size and BOS/EOS
  AERIE_CHECK(has_d && has_t, "draft model ", draft_dir.string(), ": ", (has_d ? t : d).string(),
              " is missing, so the tokenizers cannot be compared (the draft model must share the target's)");
  const nlohmann::json jd = read_json_file(d), jt = read_json_file(t);
  for (const char* key : {"model", "added_tokens"})
    AERIE_CHECK(jd.value(key, nlohmann::json()) == jt.value(key, nlohmann::json()), "draft model ",
                draft_dir.string(), ": its tokenizer.json differs from the target's in '", key,
                "' (the draft model must use the target's tokenizer)");
}

}  // namespace

std::unique_ptr<DraftModel> load_draft_model(const std::filesystem::path& dir, const Model& target,
                                             const std::filesystem::path& target_dir, ThreadPool& pool,
                                             const DraftLoadOptions& options) {
  if (!target_dir.empty()) check_same_tokenizer(dir, target_dir);
  AERIE_CHECK(options.target_layers.empty(), "draft model ", dir.string(),
              " reads no hidden state of the target; target layers cannot be chosen");
  LoadOptions lo;
  lo.progress = options.progress;
  lo.prefault = options.prefault;
  lo.weights = options.weights;
  lo.int8_group = options.int8_group;
  lo.int4_group = options.int4_group;
  std::unique_ptr<Model> model = load_model(dir, pool, lo);
  const std::string source = (dir / "config.json").string();
  AERIE_CHECK(model->n_vocab() == target.n_vocab(), source, ": draft model vocab_size ", model->n_vocab(),
              " does not match the target's vocab_size ", target.n_vocab(),
              " (drafts are verified as target token ids)");
  AERIE_CHECK(model->bos_token_ids() == target.bos_token_ids(), source, ": draft model bos_token_id ",
              ids_str(model->bos_token_ids()), " differs from the target's ", ids_str(target.bos_token_ids()),
              " (a different tokenizer)");
  AERIE_CHECK(model->eos_token_ids() == target.eos_token_ids(), source, ": draft model eos_token_id ",
              ids_str(model->eos_token_ids()), " differs from the target's ", ids_str(target.eos_token_ids()),
              " (a different tokenizer)");
  return std::make_unique<DraftModel>(std::move(model), dir.string());
}

}  // namespace aerie
