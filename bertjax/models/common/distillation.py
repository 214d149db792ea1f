"""A student and a frozen teacher run on the same batch: the model side of distillation.

Params nest as `student/...` and `teacher/...`. The teacher runs deterministically
(no dropout) behind `stop_gradient`, so no backward pass goes through it; keeping
its weights fixed is the optimizer's job (`make_optimizer.frozen = ['^teacher/']`),
which also gives it no optimizer state. Outputs are the student's, plus every teacher
output under `teacher_<name>` - what bertjax.objectives.distill reads.

  Trainer.model = @student_teacher()
  student_teacher.student = @student/build_model()
  student_teacher.teacher = @teacher/build_model()
"""
from typing import Any

import flax.linen as nn
import gin
import jax


class StudentTeacher(nn.Module):
  student: nn.Module
  teacher: nn.Module
  # Teacher outputs to keep (None: all); dropping unused ones saves memory.
  teacher_outputs: tuple[str, ...] | None = None

  @property
  def config(self) -> Any:
    """The student's config (what a run trains and reports)."""
    return self.student.config

  @nn.compact
  def __call__(self, input_ids, *, deterministic: bool = True,
               output_hidden_states: bool = False, **inputs) -> dict:
    out = dict(self.student(input_ids, deterministic=deterministic,
                            output_hidden_states=output_hidden_states, **inputs))
    teacher_out = self.teacher(input_ids, deterministic=True,
                               output_hidden_states=output_hidden_states, **inputs)
    for name, value in teacher_out.items():
      if value is not None and (self.teacher_outputs is None or name in self.teacher_outputs):
        out[f"teacher_{name}"] = jax.lax.stop_gradient(value)
    return out


@gin.configurable
def student_teacher(student: Any = gin.REQUIRED, teacher: Any = gin.REQUIRED,
                    teacher_outputs: tuple[str, ...] | None = None) -> StudentTeacher:
  """gin entry: `student` / `teacher` are modules (e.g. scoped `@build_model()`s)."""
  return StudentTeacher(student, teacher, None if teacher_outputs is None
                        else tuple(teacher_outputs))
