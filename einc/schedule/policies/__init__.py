"""Default schedule policies, one module per kind of device, built with
einc.schedule.builder.ScheduleBuilder and reached through the target
(`CLikeTarget.default_schedule`): `cpu` for the C target."""
