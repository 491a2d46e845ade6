"""Models: `policy` (loading any Hugging Face causal LM, prompt encoding, token log-probs),
`fused_llama` (the fast Llama/Qwen2 forward), `tiny` (the embedded ~1M-parameter default model)."""
