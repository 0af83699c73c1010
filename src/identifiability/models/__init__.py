"""Models: loading (safetensors only), the architecture registry, content keys, the trace, fine-tuning."""
