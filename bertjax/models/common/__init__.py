"""What several families share: the encoder config base, task heads, encoder-decoder masks,
the student-teacher wrapper of distillation."""
