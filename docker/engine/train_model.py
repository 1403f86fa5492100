"""Train the CPU engine rehearsal's model: a tiny Llama (2 layers, hidden 64) that answers the smoke checks.

Runs INSIDE the rehearsal image (its torch, transformers, safetensors: the versions SGLang serves it
with), deterministically and offline: fixed seeds, one thread, CPU, data generated here.

    python train_model.py TOKENIZER_DIR OUT_DIR [--steps N]

The tokenizer, chat template and bench_serving's dataset file are the worker simulator's
(bundle/rehearsal/simulator/simulated_model), copied next to the weights. What it learns, in the chat format
SGLang applies (`<|user|> ... </s> <|assistant|>`):
- a question about a country's capital -> the capital, then end of sequence (smoke's "Paris",
  also after a long preamble: smoke's prompt over 64 tokens);
- anything else -> one fixed, varied sentence (no word repeated: the degenerate-output floors).
config.json carries "sglang_bundle_rehearsal_only": true: launch and doctor refuse it outside a rehearsal.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SEED = 20261201
CAPITALS = {"France": "Paris", "Germany": "Berlin", "Italy": "Rome", "Spain": "Madrid", "Japan": "Tokyo",
            "England": "London"}
QUESTIONS = ["What is the capital of {c}? Answer in one word.", "What is the capital of {c}?",
             "Tell me the capital of {c}.", "Which city is the capital of {c}? Answer in one word.",
             "Name the capital city of {c}.", "capital of {c}?"]
# Smoke's long-prompt preamble is prose; the model sees it as words and <unk>s. A few real-prose
# preambles and random-word ones teach it to find the question after any preamble.
PREAMBLES = ["Background for the question below. A deployment bundle pins every package of an inference "
             "stack, builds layered container images, renders compose files for each topology, checks the "
             "configuration before anything starts, waits until the servers truly serve, reads back which "
             "kernels they run, and measures their speed against a baseline. The question that follows has a "
             "short answer; the text above is only there to make the prompt long enough to take the prefill "
             "path. ", "Please read this first. The answer is short and the text is long. "]
# Every word in the simulator's vocabulary (an unknown word would come back as <unk>).
FALLBACK = "I can only name the capital city of a country . Please tell me about one ."
MAX_LEN = 448
# About 4.4 MB of fp32 weights in shards of at most this size: several shards, as a real checkpoint has.
SHARD_SIZE = "600KB"


def chat(tokenizer, user: str) -> list[int]:
    text = tokenizer.apply_chat_template([{"role": "user", "content": user}], tokenize=False,
                                         add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def example(tokenizer, rng: random.Random, words: list[str]) -> tuple[list[int], list[int]]:
    kind = rng.random()
    if kind < 0.7:
        country = "France" if rng.random() < 0.5 else rng.choice(sorted(CAPITALS))
        question = rng.choice(QUESTIONS).format(c=country)
        preamble = ""
        r = rng.random()
        if r < 0.3:
            preamble = rng.choice(PREAMBLES) * rng.randint(1, 3)
        elif r < 0.55:
            preamble = " ".join(rng.choice(words) for _ in range(rng.randint(1, 300))) + " "
        prompt, answer = preamble + question, CAPITALS[country]
    else:
        prompt = " ".join(rng.choice(words) for _ in range(rng.randint(1, 200)))
        answer = FALLBACK
    ids = chat(tokenizer, prompt)[-(MAX_LEN - 24):]
    target = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return ids, target


def batch(tokenizer, rng, words, size: int):
    rows = [example(tokenizer, rng, words) for _ in range(size)]
    length = max(len(p) + len(t) for p, t in rows)
    pad = tokenizer.eos_token_id
    inputs = torch.full((size, length), pad, dtype=torch.long)
    labels = torch.full((size, length), -100, dtype=torch.long)
    for i, (p, t) in enumerate(rows):
        seq = p + t
        inputs[i, :len(seq)] = torch.tensor(seq)
        labels[i, len(p):len(seq)] = torch.tensor(t)  # loss on the answer only
    return inputs, labels


def answer_loss(model, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The causal LM loss on the answer tokens only, as LlamaForCausalLM(labels=...) computes it (position
    t predicts token t + 1; -100 ignored; the mean over the rest), with the output head applied only at
    those positions: a few dozen of a batch's ~7,000. The head over every position (7,000 x 8,192 logits a
    step, and their gradient) was most of the training's time."""
    hidden = model.model(input_ids=inputs).last_hidden_state[:, :-1]
    targets = labels[:, 1:]
    answer = targets != -100
    return torch.nn.functional.cross_entropy(model.lm_head(hidden[answer]), targets[answer])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tokenizer_dir", type=Path)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--steps", type=int, default=160)
    args = ap.parse_args()

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    rng = random.Random(SEED)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(args.tokenizer_dir))
    special = set(tokenizer.all_special_tokens) | {"<|system|>", "<|user|>", "<|assistant|>"}
    words = [w for w, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1]) if w not in special]

    config = LlamaConfig(vocab_size=len(tokenizer.get_vocab()), hidden_size=64, intermediate_size=256,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=2048, rms_norm_eps=1e-5, tie_word_embeddings=False,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2, torch_dtype="float32")
    model = LlamaForCausalLM(config)
    optim = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(optim, max_lr=3e-3, total_steps=args.steps, pct_start=0.1)
    model.train()
    for step in range(1, args.steps + 1):
        inputs, labels = batch(tokenizer, rng, words, 16)
        loss = answer_loss(model, inputs, labels)
        optim.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        sched.step()
        if step % 25 == 0 or step == 1:
            print(f"train: step {step}/{args.steps} loss {loss.item():.4f}", flush=True)

    model.eval()
    checks = [("What is the capital of France? Answer in one word.", "Paris"),
              (PREAMBLES[0] * 3 + "What is the capital of France? Answer in one word.", "Paris"),
              ("hello there", FALLBACK)]
    for prompt, want in checks:
        ids = torch.tensor([chat(tokenizer, prompt)])
        out = model.generate(ids, max_new_tokens=24, do_sample=False, eos_token_id=2, pad_token_id=2)
        got = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        print(f"train: greedy {prompt[-50:]!r} -> {got!r}", flush=True)
        if got.strip() != want:
            raise SystemExit(f"train: the model answers {got!r}, not {want!r}: more --steps")

    args.out_dir.mkdir(parents=True, exist_ok=True)
    # In shards with an index, as DeepSeek-V4-Flash's checkpoint is: SGLang's own multi-shard loader and
    # its tqdm bar run in every engine rehearsal, and launch's readiness wait reads that real output.
    model.save_pretrained(str(args.out_dir), safe_serialization=True, max_shard_size=SHARD_SIZE)
    shards = sorted(p.name for p in args.out_dir.glob("model-*.safetensors"))
    if len(shards) < 2 or not (args.out_dir / "model.safetensors.index.json").is_file():
        raise SystemExit(f"train: expected an indexed multi-shard checkpoint, got {shards}")
    print(f"train: saved in {len(shards)} shards with model.safetensors.index.json", flush=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "bench-sharegpt.json"):
        shutil.copy(args.tokenizer_dir / name, args.out_dir / name)
    cfg = json.loads((args.out_dir / "config.json").read_text())
    cfg["sglang_bundle_rehearsal_only"] = True
    cfg["_comment"] = ("CPU engine rehearsal model (docker/engine/train_model.py): 2-layer Llama trained to "
                       "answer the smoke checks. NEVER for a GPU host: launch and doctor refuse it there.")
    (args.out_dir / "config.json").write_text(json.dumps(cfg, indent=1, sort_keys=True) + "\n")
    (args.out_dir / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}, indent=1) + "\n")


if __name__ == "__main__":
    main()
