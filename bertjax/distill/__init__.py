"""Task-specific distillation into small students (Tang et al., 2019): the fine-tuned
teacher reopened (teacher.py), the transfer set (transfer.py), the BiLSTM student on disk
(student_checkpoint.py), `python -m bertjax.distill.student` and
`python -m bertjax.distill.speed`."""
