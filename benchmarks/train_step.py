"""What one training step of the CPU engine rehearsal's model costs (docker/engine/train_model.py), against
a named peer in the same run: the step as transformers computes the loss (`LlamaForCausalLM(labels=...)`,
the output head over every position of the batch), beside the trainer's `answer_loss` (the head only
where the loss is: the answer tokens). Same model, same batches, alternating; one thread, as the trainer.
Runs inside the rehearsal image (its torch and transformers, the versions SGLang serves the model with):

    docker run --rm --network none -v "$PWD:/src:ro" sglang-bundle/rehearsal:<tag> \
        python /src/benchmarks/train_step.py [--steps 12]

Prints each way's median seconds a step, their ratio, and the two losses of the first batch (equal to
float32 rounding: the same loss, computed at fewer positions). 2026-12-06, 2 shared cores at a load of
about 13, 8 steps: 2.26 s against 0.27 s a step (8.3x), first losses 9.0516 both.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SRC / "docker" / "engine"))

import torch  # noqa: E402
import train_model as trainer  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    torch.manual_seed(trainer.SEED)
    torch.set_num_threads(1)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(SRC / "bundle" / "simulator" / "simulated_model"))
    words = [w for w in tokenizer.get_vocab() if not w.startswith("<")]
    rng = random.Random(trainer.SEED)
    batches = [trainer.batch(tokenizer, rng, sorted(words), 16) for _ in range(args.steps)]
    config = LlamaConfig(vocab_size=len(tokenizer.get_vocab()), hidden_size=64, intermediate_size=256,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=2048, tie_word_embeddings=False)
    peer = LlamaForCausalLM(config)
    ours = copy.deepcopy(peer)
    ways = {"transformers' loss (head at every position)": (peer, lambda m, i, lab: m(input_ids=i, labels=lab).loss),
            "answer_loss (head at the answer tokens)": (ours, trainer.answer_loss)}
    optims = {name: torch.optim.AdamW(model.parameters(), lr=3e-3) for name, (model, _) in ways.items()}
    seconds = {name: [] for name in ways}
    first = {}
    for inputs, labels in batches:
        for name, (model, loss_of) in ways.items():
            start = time.perf_counter()
            loss = loss_of(model, inputs, labels)
            optims[name].zero_grad()
            loss.backward()
            optims[name].step()
            seconds[name].append(time.perf_counter() - start)
            first.setdefault(name, loss.item())
    medians = {name: statistics.median(s) for name, s in seconds.items()}
    peer_name, our_name = ways
    print(json.dumps({"steps": args.steps, "median_s": medians, "ratio": medians[peer_name] / medians[our_name],
                      "first_loss": first}, indent=1))


if __name__ == "__main__":
    main()
