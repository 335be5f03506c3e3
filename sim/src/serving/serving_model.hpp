// What the serving model needs of a transformer architecture, per GPU of a TP group.
#pragma once

#include "fleetsim/model_profile.hpp"

namespace fleetsim {

struct ModelShape {
  double layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, head_dim = 0;
  double experts = 0, top_k = 1;  // a mixture of experts: each token's MLP is top_k of `experts` (0: a dense MLP)
  double shared_ffn = 0;          // and a shared expert of this width every token passes through (0: none)
  double dense_layers = 0, dense_ffn = 0;  // the first layers' dense MLP before the mixtures (DeepSeek's)
  std::optional<LatentAttention> latent;   // multi-head latent attention (DeepSeek), in place of q, k, v heads
  bool gated = false;
  int tp = 1;
  double heads_per_gpu = 0, kv_heads_per_gpu = 0;
  static ModelShape of(const Architecture& a, int tp);
  // Weights: attention (QKV with grouped KV heads, output), MLP (gated: gate, up, down; every expert's,
  // and the router, in a mixture of experts), two norms a layer, the embedding and an untied LM head
  // (Llama 3's), the final norm.
  double attention_parameters() const;  // a layer's q, k, v and output projections (or latent attention's)
  double mlp_parameters(bool dense) const;  // a layer's MLP: a dense layer's, or every expert's and the shared one's
  double routed_expert_parameters() const;  // every mixture layer's routed experts (not the shared one, nor the router)
  // All of them; of them, the layers' linear weights (what weight-only quantization stores narrower); and of
  // the linear weights, those every TP rank holds whole (latent attention's down-projections).
  struct Weights {
    double all = 0, linear = 0, replicated = 0;
  };
  // A pipeline stage's: `count` layers from `first`, with the embedding (the first stage) and the LM head
  // and final norm (the last).
  Weights stage_weights(int first, int count, bool embedding, bool head) const;
  Weights weights() const;  // the whole model's: one stage of every layer
  double parameters() const { return weights().all; }
  double linear_parameters() const { return weights().linear; }
  double replicated_parameters() const { return weights().replicated; }
};


}  // namespace fleetsim
