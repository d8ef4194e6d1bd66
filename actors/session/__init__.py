"""The session: lifecycle machine, permission policy and the actor that drives them."""
