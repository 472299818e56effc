"""Default schedule policies, one module per schedule family, built with
einc.schedule.builder.ScheduleBuilder and chosen by einc.schedule.default from the target's
family (`CLikeTarget.sketches`): `cpu` for the C target."""
