"""The simulated model: its tokenizer and the prompt rendering, read from the model folder."""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer


class SimulatedModel:
    def __init__(self, model_path: str, tokenizer_path: str | None = None):
        self.path = Path(model_path)
        tok_dir = Path(tokenizer_path or model_path)
        tok_file = tok_dir / "tokenizer.json"
        if not tok_file.is_file():
            raise SystemExit(f"worker simulator: no tokenizer.json in {tok_dir} (mount the simulated "
                             "model folder, bundle/rehearsal/simulator/simulated_model, as the model path)")
        self.tokenizer = Tokenizer.from_file(str(tok_file))
        config_file = self.path / "config.json"
        self.config = json.loads(config_file.read_text()) if config_file.is_file() else {}
        self.context_len = int(self.config.get("max_position_embeddings", 163840))
        special = {t.content for t in self.tokenizer.get_added_tokens_decoder().values()}
        vocab = self.tokenizer.get_vocab()
        self.eos_id = vocab.get("</s>", 2)
        # Output is drawn from ordinary words only, so decode -> encode gives the same ids back.
        self.filler_ids = sorted(i for w, i in vocab.items()
                                 if w not in special and w.isalpha() and len(w) > 1)
        self.word_ids = frozenset(self.filler_ids)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def render_chat(self, messages: list[dict]) -> str:
        """The chat template of tokenizer_config.json, written out (no Jinja needed here)."""
        parts = []
        for m in messages:
            content = m.get("content")
            if isinstance(content, list):  # OpenAI content parts: keep the text ones
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            parts.append(f"<|{m.get('role', 'user')}|> {content or ''} </s> ")
        return "".join(parts) + "<|assistant|>"
