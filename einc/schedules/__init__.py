"""Default schedule policies, one module per kind of device, built with
einc.schedule_builder.ScheduleBuilder and reached through the target
(`CLikeTarget.default_schedule`): `cpu` for the C target."""
