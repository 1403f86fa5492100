"""Deployment bundle for DeepSeek-V4-Flash with SGLang on RTX PRO 6000 Blackwell (sm_120)."""

__version__ = "0.1.0"
