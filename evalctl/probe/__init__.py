"""Cache-consistency probe: the same prompt, generated cold and warm, compared token by token."""
