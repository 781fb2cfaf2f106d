"""The text model's forward pass for training, over the parameters of a
transformers Qwen3_5MoeForCausalLM.

transformers' modules compute the model one small operation at a time, with
per-expert loops, hooks and checks between them: on a model of hidden size 64
the host, not the GPU, sets the pace. This is the same math in a few large
operations per layer:
  - the routed experts as two dense products over all experts, each expert's
    activation scaled by its routing weight (zero where it was not chosen);
  - the chunked gated delta rule with each chunk's triangular system solved in
    one call;
  - no masks: batches are padded on the right, and every operation is causal
    or per token, so the real tokens never see the padding.
The parameters stay transformers' own, so the trained model is saved by
transformers. `check_against_transformers` proves the two forward passes (and
their gradients) equal on perturbed weights before any training.
"""
import copy

import torch
import torch.nn.functional as F


def rms_norm(x, weight, eps):
    """Qwen3.5's zero-centered RMSNorm: the stored weight is w - 1."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + weight)


def chunk_gated_delta_rule(query, key, value, g, beta, chunk_size=64):
    """The gated delta rule over whole sequences, by chunks, as transformers'
    torch_chunk_gated_delta_rule computes it (l2-normed q and k, q scaled by
    1/sqrt(dk)), from a zero state. Shapes: q, k [B, T, Hk, dk], v [B, T, Hv, dv],
    g and beta [B, T, Hv]. Returns [B, T, Hv, dv]."""
    b, t, _, dk = key.shape
    hv, dv = value.shape[-2:]
    if key.shape[2] != hv:  # each q/k head serves consecutive value heads
        query, key = (x.repeat_interleave(hv // x.shape[2], dim=2) for x in (query, key))
    query, key, value, beta, g = [x.transpose(1, 2).float().contiguous() for x in (query, key, value, beta, g)]
    query = query * torch.rsqrt((query * query).sum(-1, keepdim=True) + 1e-6) * dk ** -0.5
    key = key * torch.rsqrt((key * key).sum(-1, keepdim=True) + 1e-6)
    pad = (chunk_size - t % chunk_size) % chunk_size
    query, key, value = (F.pad(x, (0, 0, 0, pad)) for x in (query, key, value))
    beta, g = (F.pad(x, (0, pad)) for x in (beta, g))
    n = (t + pad) // chunk_size
    k_beta = (key * beta[..., None]).reshape(b, hv, n, chunk_size, dk)
    v_beta = (value * beta[..., None]).reshape(b, hv, n, chunk_size, dv)
    query, key = (x.reshape(b, hv, n, chunk_size, dk) for x in (query, key))
    cum = g.reshape(b, hv, n, chunk_size).cumsum(-1)
    upper = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device).triu(1)
    decay = (cum[..., :, None] - cum[..., None, :]).masked_fill(upper, float("-inf")).exp()
    system = (k_beta @ key.transpose(-1, -2)) * decay
    intra = (query @ key.transpose(-1, -2)) * decay
    rhs = torch.cat([v_beta, k_beta * cum.exp()[..., None]], dim=-1)
    solved = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)
    new_values, k_cumdecay = solved[..., :dv], solved[..., dv:]
    state = torch.zeros(b, hv, dk, dv, dtype=torch.float32, device=query.device)
    query = query * cum.exp()[..., None]
    key = key * (cum[..., -1:] - cum).exp()[..., None]
    chunk_decay = cum[..., -1].exp()[..., None, None]
    outs = []
    for i in range(n):
        v_new = new_values[:, :, i] - k_cumdecay[:, :, i] @ state
        outs.append(query[:, :, i] @ state + intra[:, :, i] @ v_new)
        state = state * chunk_decay[:, :, i] + key[:, :, i].transpose(-1, -2) @ v_new
    out = torch.stack(outs, dim=2).reshape(b, hv, -1, dv)[:, :, :t]
    return out.transpose(1, 2)


def fake_quantize(w, bits, group):
    """w rounded to `bits`-bit codes in groups of `group` along the last
    dimension, each group with its own scale and offset, as MLX checkpoints
    store weights, with the gradient passed straight through to w. (The
    grid here runs from the group's minimum; `lily quantize` places it so
    that the edge of larger magnitude is exact. Both round each weight to
    within one step of the same width.)"""
    with torch.no_grad():
        g = w.reshape(-1, group)
        lo, hi = g.min(-1, keepdim=True).values, g.max(-1, keepdim=True).values
        levels = (1 << bits) - 1
        scale = ((hi - lo) / levels).clamp(min=1e-7)
        step = (((g - lo) / scale).round().clamp(0, levels) * scale + lo).reshape(w.shape) - w
    return w + step


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class TrainingForward:
    """forward(ids) -> (final-normed hidden states [B, T, H], each layer's
    router logits [B*T, E] in float32); head(h) -> logits.

    With `quant` set to (bits, group), every matrix is used as `lily quantize`
    would store it in an MLX checkpoint of that width (the routers at 8 bits
    in groups of 64; a matrix whose width does not split into groups as it
    is), gradients passing straight through: training on such steps teaches
    weights whose answers survive the rounding."""

    def __init__(self, model):
        self.model = model
        self.top_k = model.config.num_experts_per_tok
        rotary = model.model.rotary_emb
        # text positions are the same on all three M-RoPE rows, so M-RoPE is
        # plain NeoX RoPE on the first `rotary` dims of each head
        self.inv_freq = rotary.inv_freq.float()
        self.rope_scale = float(rotary.attention_scaling)
        self.quant = None

    def w(self, p, router=False):
        """The matrix p as this pass uses it: itself, or rounded as `quant` says."""
        if self.quant is None:
            return p
        bits, group = (8, 64) if router else self.quant
        return p if p.shape[-1] % group else fake_quantize(p, bits, group)

    def head(self, h, frozen=False):
        """Logits over the vocabulary; `frozen` passes no gradient to the head."""
        weight = self.w(self.model.lm_head.weight)
        return F.linear(h, weight.detach() if frozen else weight)

    def embed(self, ids, frozen=False):
        """The token embeddings; `frozen` passes no gradient to the table.
        padding_idx as transformers' embedding has it: no gradient into the
        padding row."""
        table = self.model.model.embed_tokens
        weight = self.w(table.weight)
        return F.embedding(ids, weight.detach() if frozen else weight, padding_idx=table.padding_idx)

    def decoder_layer(self, layer, x, cos, sin):
        """One decoder layer: (its output, its router logits)."""
        h = rms_norm(x, layer.input_layernorm.weight, layer.input_layernorm.eps)
        if layer.block_type == "linear_attention":
            x = x + self.gated_delta_net(layer.linear_attn, h)
        else:
            x = x + self.attention(layer.self_attn, h, cos, sin)
        y, logits = self.moe(layer.mlp, rms_norm(x, layer.post_attention_layernorm.weight,
                                                 layer.post_attention_layernorm.eps))
        return x + y, logits

    def rope(self, t, device):
        freqs = torch.arange(t, device=device, dtype=torch.float32)[:, None] * self.inv_freq.to(device)[None]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos() * self.rope_scale, emb.sin() * self.rope_scale

    def gated_delta_net(self, m, x):
        b, t, _ = x.shape
        qkv = F.linear(x, self.w(m.in_proj_qkv.weight))
        z = F.linear(x, self.w(m.in_proj_z.weight))
        beta = F.linear(x, self.w(m.in_proj_b.weight)).sigmoid()
        g = -m.A_log.float().exp() * F.softplus(F.linear(x, self.w(m.in_proj_a.weight)) + m.dt_bias)
        w = m.conv1d.weight  # [C, 1, K], depthwise and causal
        qkv = F.silu(F.conv1d(qkv.transpose(1, 2), w, padding=w.shape[-1] - 1, groups=w.shape[0])[..., :t])
        q, k, v = torch.split(qkv.transpose(1, 2), [m.key_dim, m.key_dim, m.value_dim], dim=-1)
        o = chunk_gated_delta_rule(q.reshape(b, t, -1, m.head_k_dim), k.reshape(b, t, -1, m.head_k_dim),
                                   v.reshape(b, t, -1, m.head_v_dim), g, beta)
        z = z.reshape(b, t, -1, m.head_v_dim)
        # the gated norm: a plain weight, not the zero-centered (1 + w)
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + m.norm.variance_epsilon) * m.norm.weight * F.silu(z)
        return F.linear(o.reshape(b, t, -1), self.w(m.out_proj.weight))

    def attention(self, m, x, cos, sin):
        b, t, _ = x.shape
        hd = m.head_dim
        q, gate = F.linear(x, self.w(m.q_proj.weight)).view(b, t, -1, 2 * hd).chunk(2, dim=-1)
        gate = gate.reshape(b, t, -1)
        q = rms_norm(q, m.q_norm.weight, m.q_norm.eps).transpose(1, 2)
        k = rms_norm(F.linear(x, self.w(m.k_proj.weight)).view(b, t, -1, hd), m.k_norm.weight, m.k_norm.eps).transpose(1, 2)
        v = F.linear(x, self.w(m.v_proj.weight)).view(b, t, -1, hd).transpose(1, 2)
        r = cos.shape[-1]
        q = torch.cat([q[..., :r] * cos + rotate_half(q[..., :r]) * sin, q[..., r:]], dim=-1)
        k = torch.cat([k[..., :r] * cos + rotate_half(k[..., :r]) * sin, k[..., r:]], dim=-1)
        groups = q.shape[1] // k.shape[1]  # query head i reads key/value head i // groups
        k, v = (y.repeat_interleave(groups, dim=1) for y in (k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=m.scaling)
        o = o.transpose(1, 2).reshape(b, t, -1) * torch.sigmoid(gate)
        return F.linear(o, self.w(m.o_proj.weight))

    def moe(self, m, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        logits = F.linear(x, self.w(m.gate.weight, router=True)).float()
        top_w, top_i = logits.softmax(-1).topk(self.top_k, dim=-1)
        top_w = top_w / top_w.sum(-1, keepdim=True)
        ex = m.experts
        gate_up, down = self.w(ex.gate_up_proj), self.w(ex.down_proj)
        e, two_i, h = gate_up.shape
        weights = torch.zeros(x.shape[0], e, dtype=x.dtype, device=x.device).scatter(1, top_i, top_w.to(x.dtype))
        gate, up = (x @ gate_up.reshape(e * two_i, h).t()).view(-1, e, two_i).chunk(2, dim=-1)
        act = F.silu(gate) * up * weights[..., None]
        routed = act.reshape(x.shape[0], -1) @ down.permute(0, 2, 1).reshape(e * (two_i // 2), h)
        se = m.shared_expert
        shared = F.linear(F.silu(F.linear(x, self.w(se.gate_proj.weight))) * F.linear(x, self.w(se.up_proj.weight)),
                          self.w(se.down_proj.weight))
        y = routed + torch.sigmoid(F.linear(x, self.w(m.shared_expert_gate.weight, router=True))) * shared
        return y.reshape(shape), logits

    def __call__(self, ids):
        inner = self.model.model
        x = self.embed(ids)
        cos, sin = self.rope(ids.shape[1], ids.device)
        router_logits = []
        for layer in inner.layers:
            x, logits = self.decoder_layer(layer, x, cos, sin)
            router_logits.append(logits)
        return rms_norm(x, inner.norm.weight, inner.norm.eps), router_logits

    def mtp(self, head, ids, hidden):
        """The multi-token-prediction head (make_mtp_head) over a batch, as
        Lily runs it: at position q it reads the token at q + 1 and the main
        model's final-normed hidden state at q, [norm(embedding) |
        norm(hidden)] through mtp.fc, one full-attention decoder layer at
        position q and mtp.norm; its output predicts the token at q + 2
        through the shared head. Returns (that output [B, T-1, H], its router
        logits). The main model's hidden states and embedding are read
        frozen: the head learns to read the model, not to change it."""
        eps = head.norm.eps
        e = rms_norm(self.embed(ids[:, 1:], frozen=True), head.pre_fc_norm_embedding.weight, eps)
        h = rms_norm(hidden[:, :-1].detach(), head.pre_fc_norm_hidden.weight, eps)
        x = F.linear(torch.cat([e, h], dim=-1), self.w(head.fc.weight))
        cos, sin = self.rope(x.shape[1], x.device)
        x, logits = self.decoder_layer(head.layers[0], x, cos, sin)
        return rms_norm(x, head.norm.weight, eps), logits


def make_mtp_head(model, seed=0):
    """The release's multi-token-prediction head for `model`, as modules under
    the release's names (fc, pre_fc_norm_embedding, pre_fc_norm_hidden,
    layers.0.*, norm; 19 tensors under `mtp.` once saved). transformers has
    no module for it; its decoder layer is transformers' full-attention one.
    Matrices start as transformers starts them (normal, initializer_range),
    the zero-centred norms at a multiplier of one."""
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as m
    cfg = model.config
    hidden = cfg.hidden_size
    head = torch.nn.Module()
    head.fc = torch.nn.Linear(2 * hidden, hidden, bias=False)
    head.pre_fc_norm_embedding = m.Qwen3_5MoeRMSNorm(hidden, eps=cfg.rms_norm_eps)
    head.pre_fc_norm_hidden = m.Qwen3_5MoeRMSNorm(hidden, eps=cfg.rms_norm_eps)
    head.layers = torch.nn.ModuleList([m.Qwen3_5MoeDecoderLayer(cfg, cfg.layer_types.index("full_attention"))])
    head.norm = m.Qwen3_5MoeRMSNorm(hidden, eps=cfg.rms_norm_eps)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in head.named_parameters():
            if name.endswith("norm.weight"):
                p.zero_()
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * cfg.initializer_range)
    if len(head.state_dict()) != 19:
        raise SystemExit(f"the MTP head has {len(head.state_dict())} tensors, not the release's 19: "
                         f"{sorted(head.state_dict())}")
    return head.to(next(model.parameters()).device)


def check_against_transformers(model, device, tolerance=1e-4, grad_tolerance=1e-3):
    """Logits and the gradients of every parameter, through TrainingForward
    and through transformers' own modules, on a copy of `model` whose weights
    are all perturbed (so a skipped norm weight or bias cannot hide behind an
    initial zero or one), in float32 without TF32. Raises SystemExit with the
    worst parameter's name on a difference."""
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        ref = copy.deepcopy(model).float()
        gen = torch.Generator(device="cpu").manual_seed(11)
        with torch.no_grad():
            for name, p in ref.named_parameters():
                noise = torch.randn(p.shape, generator=gen).to(device)
                if name.endswith("A_log"):
                    p.copy_(noise * 0.5)  # decays from fast to slow
                else:
                    p.add_(noise * (0.3 if p.dim() == 1 else p.float().std().clamp(min=0.02) * 0.5))
        vocab = ref.config.vocab_size
        ids = torch.randint(0, vocab, (3, 150), generator=gen).to(device)
        probe = torch.randn(3, 150, vocab, generator=gen).to(device) / vocab ** 0.5
        results = []
        for run in ("transformers", "training"):
            ref.zero_grad(set_to_none=True)
            if run == "transformers":
                logits = ref(input_ids=ids, use_cache=False).logits.float()
            else:
                forward = TrainingForward(ref)
                hidden, _ = forward(ids)
                logits = forward.head(hidden).float()
            (logits * probe).sum().backward()
            results.append((logits.detach(), {n: p.grad.detach().clone() for n, p in ref.named_parameters()
                                              if p.grad is not None}))
        (want, want_grads), (got, got_grads) = results
        logit_err = ((got - want).norm() / want.norm()).item()
        if logit_err > tolerance:
            raise SystemExit(f"the training forward pass differs from transformers': logits have relative error "
                             f"{logit_err:.2e}")
        grad_errs = []
        for name, g in want_grads.items():
            other = got_grads.get(name)
            err = float("inf") if other is None else ((other - g).norm() / g.norm().clamp(min=1e-20)).item()
            grad_errs.append((err, name))
        err, name = max(grad_errs)
        if err > grad_tolerance:
            raise SystemExit(f"the training forward pass differs from transformers': the gradient of {name} has "
                             f"relative error {err:.2e}")
        return logit_err, err, name
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
